package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// get_ticket: reads a ticket of the caller's tenant, its status and its
// comments in the order committed; it writes nothing. Every read is
// strongly consistent: a comment or close whose answer was returned is in
// the next get_ticket.
func init() {
	delivery := schemaObject(map[string]any{
		"state": schemaString, "external_id": schemaString, "external_url": schemaString,
	}, "state")
	register(Function{
		Name:        GetTicket,
		Description: "Read a ticket of the user's organisation by its ticket_id, as returned by create_ticket: its status and its comments. It changes nothing.",
		Fields:      []Field{ticketIDField},
		Answer: Answer{Kind: KindFound, Members: map[string]any{
			"ticket": schemaObject(map[string]any{
				"ticket_id": schemaString, "title": schemaString, "description": schemaString,
				"priority": schemaString, "status": map[string]any{"enum": []string{StatusOpen, StatusClosed}},
				"created_at": schemaString, "closed_at": schemaString, "resolution": schemaString,
				"delivery": delivery,
				"comments": map[string]any{"type": "array", "items": schemaObject(map[string]any{
					"comment_id": schemaString, "body": schemaString, "created_at": schemaString, "delivery": delivery,
				}, "comment_id", "body", "created_at")},
			}, "ticket_id", "title", "description", "priority", "status", "created_at", "comments"),
		}, Required: []string{"ticket"}},
		Read:  getTicket,
		Codes: []string{CodeTicketNotFound},
		Busy:  "The ticket store is busy. Call the function again with the same ticket_id.",
	})
}

func getTicket(ctx context.Context, s *Service, r Request) Outcome {
	t, out, ok := tenantTicket(ctx, s, r)
	if !ok {
		return out
	}
	a, err := ParseTicketArguments(t.Arguments)
	if err != nil {
		return Outcome{Kind: KindInternal, Err: fmt.Errorf("ticket %s arguments unreadable: %v", t.ID, err)}
	}
	v := &TicketView{
		TicketID: t.ID, Title: a.Title, Description: a.Description, Priority: a.Priority, Status: StatusOpen,
		CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339), Delivery: deliveryView(t.Delivery), Comments: []CommentView{},
	}
	if t.Attrs.Str(AttrStatus) == StatusClosed {
		resolution := t.Attrs.Str(AttrResolution)
		v.Status, v.ClosedAt, v.Resolution = StatusClosed, shown(t.Attrs.Str(AttrClosedAt)), &resolution
	}
	var keys []string
	prefix := EffectKeyPrefix(KindComment)
	for _, k := range t.Attrs.List(AttrFollowUps) {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		items, err := s.Store.Items(ctx, keys)
		if err != nil {
			return outcomeOfRead(err)
		}
		for _, it := range items {
			v.Comments = append(v.Comments, CommentView{CommentID: strings.TrimPrefix(it.Key, prefix),
				Body: it.Attrs.Str(attrBody), CreatedAt: shown(it.Attrs.Str(attrCreatedAt)), Delivery: deliveryView(it.Delivery)})
		}
	}
	return Answered(KindFound, Found{Status: KindFound.String(), Ticket: v})
}

// outcomeOfRead is the answer to a read that failed: busy when the store
// was, else internal.
func outcomeOfRead(err error) Outcome {
	if errors.Is(err, ErrBusy) {
		return Outcome{Kind: KindBusy, Err: err}
	}
	return Outcome{Kind: KindInternal, Err: err}
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
	Status      string `json:"status"` // StatusOpen or StatusClosed
	CreatedAt   string `json:"created_at"`
	// ClosedAt and Resolution are present once closed ("" for a close
	// without a resolution).
	ClosedAt   string  `json:"closed_at,omitempty"`
	Resolution *string `json:"resolution,omitempty"`
	// Comments are every comment, in the order committed.
	Comments []CommentView `json:"comments"`
	// Delivery is absent for a ticket with no delivery state.
	Delivery *DeliveryView `json:"delivery,omitempty"`
}

// CommentView is what get_ticket returns of a comment.
type CommentView struct {
	CommentID string        `json:"comment_id"`
	Body      string        `json:"body"`
	CreatedAt string        `json:"created_at"`
	Delivery  *DeliveryView `json:"delivery,omitempty"`
}

// DeliveryView is get_ticket's view of a delivery: the helpdesk's id and
// URL only once delivered.
type DeliveryView struct {
	State       string `json:"state"`
	ExternalID  string `json:"external_id,omitempty"`
	ExternalURL string `json:"external_url,omitempty"`
}

// deliveryView shows a delivery state, and the helpdesk's id and URL once
// delivered.
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
