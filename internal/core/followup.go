package core

import (
	"context"
	"errors"
	"time"
)

// What the follow-ups (add_comment, close_ticket) share: the ticket they
// name, the conditions that it is open and the caller's, and the answer
// when it is not.

// Rejection codes of the follow-ups.
const (
	CodeTicketClosed    = "ticket_closed"
	CodeTooManyComments = "too_many_comments"
)

// MaxComments is how many comments a ticket holds; the next is refused
// too_many_comments.
const MaxComments = 100

// The ticket's attributes the follow-ups set (Ticket.Attrs), beside
// AttrFollowUps. A ticket without AttrStatus is open: every ticket
// written before closing existed reads so.
const (
	AttrStatus     = "status"
	AttrClosedAt   = "closed_at"
	AttrResolution = "resolution"
	AttrCloseID    = "close_id"
)

// The values of AttrStatus.
const (
	StatusOpen   = "open"
	StatusClosed = "closed"
)

// The effect kinds of the follow-ups: a destination receives them in the
// ticket's order.
const (
	KindComment = "comment"
	KindClose   = "close"
)

// ticketIDField is the follow-ups' ticket_id argument, as get_ticket's.
var ticketIDField = Field{Name: "ticket_id", Description: "The ticket_id that create_ticket returned.",
	Required: true, MinLen: 1, MaxLen: 100, Trim: true, NoControl: true}

// ticketNotFound is the one answer for a missing ticket and another
// tenant's.
func ticketNotFound() Outcome {
	return Reject(CodeTicketNotFound,
		"No ticket with this ticket_id exists for this user; check the ticket_id, or ask the user for it.")
}

// openTicketOf are the conditions that the ticket's item exists, is the
// tenant's and is open, then more.
func openTicketOf(tenant string, more ...Cond) []Cond {
	return append([]Cond{{Op: Exists}, {Op: Equals, Attr: AttrTenantID, Value: tenant},
		{Op: EqualsOrAbsent, Attr: AttrStatus, Value: StatusOpen}}, more...)
}

// tenantTicket reads the ticket r names, as the caller's tenant may see
// it: ok is false with the answer to give when it is missing, another
// tenant's, or cannot be read.
func tenantTicket(ctx context.Context, s *Service, r Request) (Ticket, Outcome, bool) {
	t, err := s.Store.Ticket(ctx, TrimBlank(r.Args["ticket_id"]))
	switch {
	case errors.Is(err, ErrNotFound):
		return Ticket{}, ticketNotFound(), false
	case errors.Is(err, ErrBusy):
		return Ticket{}, Outcome{Kind: KindBusy, Err: err}, false // the service adds the Busy message
	case err != nil:
		return Ticket{}, Outcome{Kind: KindInternal, Err: err}, false
	case t.TenantID != r.User.TenantID:
		return Ticket{}, ticketNotFound(), false // the same answer as a missing ticket
	}
	return t, Outcome{}, true
}

// refusedOnTicket is a follow-up's Write.Refused: its first write, the
// ticket's conditional update, was refused, so the ticket is read back as
// the caller may see it (missing and another tenant's answer
// ticket_not_found) and judge answers from it; a refusal of a later
// write (a put of an id the plan drew) means a broken generator.
func refusedOnTicket(judge func(Ticket) Refusal) func(ctx context.Context, s *Service, r Request, item int) Refusal {
	return func(ctx context.Context, s *Service, r Request, item int) Refusal {
		if item != 0 {
			return Refusal{Outcome: Outcome{Kind: KindInternal, Err: errTakenID}}
		}
		t, out, ok := tenantTicket(ctx, s, r)
		if !ok {
			return Refusal{Outcome: out}
		}
		return judge(t)
	}
}

// raced answers a refusal whose condition holds again when the ticket is
// read back: another write changed it in between. Nothing was written, so
// the call is safe to repeat.
func raced() Refusal {
	return Refusal{Outcome: Outcome{Kind: KindBusy, Err: errors.New("the ticket changed while the call was written")}}
}

// stamp is a time as items and answers carry it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// shown is a stored time as answers show it, in whole seconds; "" for
// one that does not parse.
func shown(stored string) string {
	t, err := time.Parse(time.RFC3339Nano, stored)
	if err != nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
