package core

import (
	"encoding/json"

	"github.com/aivax-examples/idempotent-callback/idem"
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
			Plan:   planTicket,
			Answer: replay[TicketResult],
			InProgress: "The same operation is still in progress; do not create another ticket. " +
				"Check again later with the same arguments and request.",
			Mismatch: "This request already created a ticket with other arguments; do not create another. " +
				"Tell the user, and start a new request only if they want a second ticket.",
		},
		Busy: "The ticket store is busy and the outcome is unknown. Call the function again with exactly " +
			"the same arguments and request; it will not create a second ticket.",
	})
}

// TicketResult is create_ticket's answer. The operation stores it (as
// JSON, with Deduplicated false) in the same transaction as the ticket,
// and every repeat replays it with Deduplicated true: the replay is the
// original answer but for that member.
type TicketResult struct {
	Status       string `json:"status"`
	TicketID     string `json:"ticket_id"`
	Deduplicated bool   `json:"deduplicated"`
}

// planTicket is the ticket to write and the answer to store.
func planTicket(r Request, k idem.OpKey) ([]byte, Writes, error) {
	result := TicketResult{Status: KindCreated.String(), TicketID: r.NewID()}
	stored, err := json.Marshal(result)
	if err != nil {
		return nil, Writes{}, err
	}
	t := Ticket{ID: result.TicketID, TenantID: r.User.TenantID, UserID: r.User.UserID,
		OperationKey: k.ID, Arguments: r.Canonical, CreatedAt: r.Now}
	return stored, Writes{Tickets: []Ticket{t}}, nil
}

func (t *TicketResult) readable() bool { return t.Status != "" && t.TicketID != "" }
func (t *TicketResult) repeated()      { t.Deduplicated = true }
