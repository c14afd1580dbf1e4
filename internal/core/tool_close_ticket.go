package core

import (
	"encoding/json"
	"errors"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// CloseTicket is the function name of close_ticket.
const CloseTicket = "close_ticket"

// close_ticket: claims the call's key, marks the ticket closed and puts
// the close (with its delivery record when the ticket is delivered), on
// the condition that the ticket is the caller's and open, in one
// transaction. A ticket another call closed is answered already_closed,
// that answer claimed alone.
func init() {
	register(Function{
		Name: CloseTicket,
		Description: "Close a ticket of the user's organisation, by its ticket_id, once the user's problem is solved. " +
			"Closing is final: a closed ticket takes no more comments and cannot be reopened. " +
			"Calling again with the same arguments is safe and returns the same answer with deduplicated: true.",
		Fields: []Field{
			ticketIDField,
			{Name: "resolution", Description: "How the problem was solved, at most 1000 characters; line breaks and tabs allowed.",
				MaxLen: 1000, Trim: true, NoControl: true, Multiline: true},
		},
		Answer: Answer{Kind: KindCreated, Status: StatusClosed, Members: map[string]any{
			"ticket_id": schemaString, "already_closed": map[string]any{"type": "boolean"},
			"deduplicated": map[string]any{"type": "boolean"},
		}, Required: []string{"ticket_id", "deduplicated"}},
		Write: &Write{
			Plan:    planClose,
			Answer:  replay[CloseResult],
			Refused: closeRefused,
			Codes:   []string{CodeTicketNotFound},
			Final:   true, // there is no reopen
			InProgress: "The same close is still in progress; do not close again. " +
				"Check again later with the same arguments and request.",
			Mismatch: "This request already closed the ticket with other arguments. Tell the user; nothing more is needed.",
		},
		Busy: "The ticket store is busy and the outcome is unknown. Call the function again with exactly " +
			"the same arguments and request.",
	})
}

// CloseResult is close_ticket's answer, stored by the first call (or by
// the call that found the ticket closed) and replayed with Deduplicated
// true.
type CloseResult struct {
	Status        string `json:"status"`
	TicketID      string `json:"ticket_id"`
	AlreadyClosed bool   `json:"already_closed,omitempty"`
	Deduplicated  bool   `json:"deduplicated"`
}

func (c *CloseResult) readable() bool { return c.Status != "" && c.TicketID != "" }
func (c *CloseResult) repeated()      { c.Deduplicated = true }

// CloseEvent is a close's effect as a destination receives it (the
// webhook's body); Resolution is "" when the call gave none.
type CloseEvent struct {
	Type       string `json:"type"` // "ticket.closed"
	CloseID    string `json:"close_id"`
	TicketID   string `json:"ticket_id"`
	TenantID   string `json:"tenant_id"`
	UserID     string `json:"user_id"`
	Resolution string `json:"resolution"`
	ClosedAt   string `json:"closed_at"`
}

// planClose is the ticket's update, the close to put and the answer to
// store.
func planClose(r Request, k idem.OpKey) ([]byte, Writes, error) {
	ticketID := TrimBlank(r.Args["ticket_id"])
	stored, err := json.Marshal(CloseResult{Status: StatusClosed, TicketID: ticketID})
	if err != nil {
		return nil, Writes{}, err
	}
	closeID, closed, resolution := r.NewID(), stamp(r.Now), r.Args["resolution"]
	payload, err := json.Marshal(CloseEvent{Type: "ticket.closed", CloseID: closeID, TicketID: ticketID,
		TenantID: r.User.TenantID, UserID: r.User.UserID, Resolution: resolution, ClosedAt: shown(closed)})
	if err != nil {
		return nil, Writes{}, err
	}
	key := EffectKeyPrefix(KindClose) + closeID
	return stored, Writes{Items: []ItemWrite{
		{Op: Update, Key: TicketKey(ticketID), Set: Item{
			AttrStatus: StatusClosed, AttrClosedAt: closed, AttrResolution: resolution, AttrCloseID: closeID,
		}, Append: map[string]string{AttrFollowUps: key}, If: openTicketOf(r.User.TenantID)},
		{Op: PutNew, Key: key, Set: Item{
			attrTicketID: ticketID, AttrTenantID: r.User.TenantID, AttrUserID: r.User.UserID,
			attrOperationKey: k.ID, AttrResolution: resolution, AttrClosedAt: closed,
		}, Effect: &Effect{Kind: KindClose, ID: closeID, TicketID: ticketID, Payload: payload}},
	}}, nil
}

// closeRefused answers a close whose ticket update was refused: the
// ticket is missing or another tenant's, or already closed, which is
// answered already_closed and stored.
var closeRefused = refusedOnTicket(func(t Ticket) Refusal {
	if t.Attrs.Str(AttrStatus) != StatusClosed {
		return raced()
	}
	stored, err := json.Marshal(CloseResult{Status: StatusClosed, TicketID: t.ID, AlreadyClosed: true})
	if err != nil {
		return Refusal{Outcome: Outcome{Kind: KindInternal, Err: err}}
	}
	return Refusal{Store: stored}
})

// errTakenID: an item the plan named new exists already. Ids are random
// UUIDs, so the generator is broken.
var errTakenID = errors.New("an id the plan drew is taken")
