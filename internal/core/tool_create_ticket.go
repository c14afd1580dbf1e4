package core

import (
	"context"
	"encoding/json"
	"time"
)

// create_ticket: claims the call's key and writes the ticket (with its
// delivery record when a helpdesk is configured) in one transaction.
func init() {
	register(Function{
		Name: CreateTicket,
		Description: "Create a support ticket for the user. Call it once per ticket the user asked for. " +
			"If a call times out or fails, calling again with the same arguments is safe: " +
			"the same request returns the same ticket_id with deduplicated: true instead of a second ticket.",
		Fields: []Field{
			{Name: "title", Description: "A short summary of the problem, 1 to 200 characters.",
				Required: true, MinLen: 1, MaxLen: 200, Trim: true, NoControl: true},
			{Name: "description", Description: "Details of the problem, at most 4000 characters.", MaxLen: 4000},
			{Name: "priority", Description: "How urgent the problem is; normal when absent.",
				Enum: []string{"low", DefaultPriority, "high", "urgent"}, Default: DefaultPriority},
		},
		Answer: Answer{Kind: KindCreated, Members: map[string]any{
			"ticket_id": schemaString, "deduplicated": map[string]any{"type": "boolean"},
		}, Required: []string{"ticket_id", "deduplicated"}},
		Write: &Write{
			Commit: createTicket,
			Replay: replayTicket,
			InProgress: "The same operation is still in progress; do not create another ticket. " +
				"Check again later with the same arguments and request.",
			Mismatch: "This request already created a ticket with other arguments; do not create another. " +
				"Tell the user, and start a new request only if they want a second ticket.",
		},
	})
}

func createTicket(ctx context.Context, s *Service, r Request, op Operation) (Outcome, *Operation, error) {
	result := Result{Status: KindCreated.String(), TicketID: s.NewID()}
	stored, err := json.Marshal(result)
	if err != nil {
		return Outcome{}, nil, err
	}
	op.Result = stored
	t := Ticket{ID: result.TicketID, TenantID: r.User.TenantID, UserID: r.User.UserID,
		OperationKey: op.Key, Arguments: r.Canonical, CreatedAt: r.Now}
	if s.Deliver {
		// Due at once: the second it was created in.
		t.Delivery = &DeliveryStatus{State: DeliveryPending, DueAt: r.Now.Truncate(time.Second)}
	}
	existing, err := s.Store.Create(ctx, op, t, r.Now)
	return Outcome{Kind: KindCreated, Result: &result}, existing, err
}

// replayTicket is the stored create_ticket answer with deduplicated: true.
func replayTicket(stored []byte) (Outcome, bool) {
	var r Result
	if err := json.Unmarshal(stored, &r); err != nil || r.Status == "" || r.TicketID == "" {
		return Outcome{}, false
	}
	r.Deduplicated = true
	return Outcome{Kind: KindDuplicate, Result: &r}, true
}
