package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// get_ticket: reads a ticket of the caller's tenant; it writes nothing.
func init() {
	register(Function{
		Name:        GetTicket,
		Description: "Read a ticket of the user's organisation by its ticket_id, as returned by create_ticket. It changes nothing.",
		Fields: []Field{
			{Name: "ticket_id", Description: "The ticket_id that create_ticket returned.",
				Required: true, MinLen: 1, MaxLen: 100, Trim: true, NoControl: true},
		},
		Answer: Answer{Kind: KindFound, Members: map[string]any{
			"ticket": schemaObject(map[string]any{
				"ticket_id": schemaString, "title": schemaString, "description": schemaString,
				"priority": schemaString, "created_at": schemaString,
				"delivery": schemaObject(map[string]any{
					"state": schemaString, "external_id": schemaString, "external_url": schemaString,
				}, "state"),
			}, "ticket_id", "title", "description", "priority", "created_at"),
		}, Required: []string{"ticket"}},
		Read: getTicket,
		Busy: "The ticket store is busy. Call the function again with the same ticket_id.",
	})
}

func getTicket(ctx context.Context, s *Service, r Request) Outcome {
	notFound := Reject(CodeTicketNotFound,
		"No ticket with this ticket_id exists for this user; check the ticket_id, or ask the user for it.")
	t, err := s.Store.Ticket(ctx, TrimBlank(r.Args["ticket_id"]))
	switch {
	case errors.Is(err, ErrNotFound):
		return notFound
	case errors.Is(err, ErrBusy):
		return Outcome{Kind: KindBusy, Err: err} // the service adds the Busy message
	case err != nil:
		return Outcome{Kind: KindInternal, Err: err}
	case t.TenantID != r.User.TenantID:
		return notFound // the same answer as a missing ticket
	}
	a, err := ParseTicketArguments(t.Arguments)
	if err != nil {
		return Outcome{Kind: KindInternal, Err: fmt.Errorf("ticket %s arguments unreadable: %v", t.ID, err)}
	}
	return Answered(KindFound, Found{Status: KindFound.String(), Ticket: &TicketView{
		TicketID: t.ID, Title: a.Title, Description: a.Description, Priority: a.Priority,
		CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339), Delivery: deliveryView(t.Delivery),
	}})
}

// Found is get_ticket's answer.
type Found struct {
	Status string      `json:"status"`
	Ticket *TicketView `json:"ticket"`
}

// TicketView is what get_ticket returns of a ticket.
type TicketView struct {
	TicketID    string `json:"ticket_id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Priority    string `json:"priority"`
	CreatedAt   string `json:"created_at"`
	// Delivery is absent for a ticket with no delivery state.
	Delivery *DeliveryView `json:"delivery,omitempty"`
}

// DeliveryView is get_ticket's view of a ticket's delivery: the helpdesk's
// id and URL only once delivered.
type DeliveryView struct {
	State       string `json:"state"`
	ExternalID  string `json:"external_id,omitempty"`
	ExternalURL string `json:"external_url,omitempty"`
}

// FoundTicket is the ticket of a found answer (get_ticket's, or a read
// tool's of the same shape), nil for any other outcome. It reads the body
// as a caller of the service does; the doors never call it.
func (o Outcome) FoundTicket() *TicketView {
	var f Found
	if o.Kind != KindFound || json.Unmarshal(o.Body, &f) != nil {
		return nil
	}
	return f.Ticket
}

// deliveryView shows a ticket's delivery state, and the helpdesk's id and
// URL once delivered.
func deliveryView(d *DeliveryStatus) *DeliveryView {
	if d == nil || d.State == "" {
		return nil
	}
	v := &DeliveryView{State: d.State}
	if d.State == DeliveryDelivered {
		v.ExternalID, v.ExternalURL = d.ExternalID, d.ExternalURL
	}
	return v
}
