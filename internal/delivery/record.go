package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// State is a ticket's delivery state (attribute delivery_state).
type State string

// The delivery states. Pending and Delivering are live: a worker will move
// them on. Delivered, Failed and Unknown are final; only a person moves an
// Unknown or Failed ticket on.
const (
	StatePending    State = core.DeliveryPending // the state a ticket is created in
	StateDelivering State = "delivering"
	StateDelivered  State = core.DeliveryDelivered
	StateFailed     State = "failed"
	StateUnknown    State = "unknown"
)

// Valid reports whether s is one of the five states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateDelivering, StateDelivered, StateFailed, StateUnknown:
		return true
	}
	return false
}

// Live reports whether a worker still has to move the ticket on.
func (s State) Live() bool { return s == StatePending || s == StateDelivering }

// Record is the delivery record a ticket carries beside its own fields:
// the last update recorded on it, and the lease while a worker holds it.
type Record struct {
	// TicketID is the record's outbox id: a ticket's id, or the item key
	// of an effect ("COMMENT#<comment_id>", see OutboxID).
	TicketID string
	// Kind is KindTicket for a ticket's record, else its effect's kind.
	Kind string
	Update
	LeaseUntil time.Time // while delivering
	LeaseOwner string    // the claiming worker's token, while delivering
	// FollowUps are, on a ticket's record that Delivery read, the outbox
	// ids of what follows the ticket, in order (core.AttrFollowUps), read
	// with the record from the same item; nil on an effect's.
	FollowUps []string
	// Traceparent is the W3C traceparent of the span that created the
	// ticket, written with it ("" when it had none); the delivery's span
	// links to it. Updates never change it.
	Traceparent string
}

// Core is the record as core shows it (get_ticket's delivery).
func (r Record) Core() *core.DeliveryStatus {
	return &core.DeliveryStatus{State: string(r.State), DueAt: r.DueAt, ExternalID: r.ExternalID, ExternalURL: r.ExternalURL}
}

// Update is what a worker records on a ticket it holds under its lease:
// its next state and the fields beside it. A Pending update releases the
// ticket until DueAt.
type Update struct {
	State State
	// Attempts counts sends (a lookup is not a send), including a send an
	// earlier worker may have made before its lease ran out.
	Attempts int
	// LookupFailures counts lookups that failed (an error, or an answer
	// that was neither found nor absent) while the outcome of an earlier
	// send was unknown; bounded by the Engine's MaxLookups.
	LookupFailures int
	// SentUnknown: an earlier send may have created the ticket ("may be in
	// the helpdesk"), so the next worker looks it up before any resend. It
	// is cleared only by a delivery, or by a lookup made once the outcome
	// window of SentAt had closed that answered absent.
	SentUnknown bool
	// SentAt is the start, to the millisecond (rounded up), of the last
	// send whose outcome is unknown; zero when SentUnknown is false. Its
	// outcome window (OutcomeWindow) closes the destination's client
	// timeout plus the margin after it.
	SentAt time.Time
	// DueAt is when the ticket may next be claimed, in whole seconds: the
	// backoff's end while pending (the stores keep an update's DueAt only
	// when it is Pending), the second after the lease's end while
	// delivering (set by the claim). Zero once final.
	DueAt time.Time
	Error string // the last failure, for people
	// Set once delivered.
	ExternalID  string
	ExternalURL string
	DeliveredAt time.Time
}

// Claimed is what a successful claim returns: the ticket (or the effect)
// to send and its delivery record as it was just before the claim.
type Claimed struct {
	Ticket HelpdeskTicket
	// Effect is set, instead of Ticket's fields but its ID, when the
	// record is an effect's.
	Effect *Effect
	Before Record
}

// KindTicket is the kind of a ticket's own delivery record.
const KindTicket = "ticket"

// IsEffect reports whether the outbox id names an effect's record (an
// item key, "<KIND>#<id>") rather than a ticket's (its bare id).
func IsEffect(id string) bool { return strings.Contains(id, "#") }

// KindOfID is the kind of the record named by outbox id, read from the id
// alone: KindTicket for a ticket's bare id, else the effect's kind, the
// lower-cased prefix of its item key ("COMMENT#<id>" is a comment's), for
// the lines that name a record without having read it.
func KindOfID(id string) string {
	kind, _, isEffect := strings.Cut(id, "#")
	if !isEffect {
		return KindTicket
	}
	return strings.ToLower(kind)
}

// Sequencer is implemented by an outbox whose records include effects
// that follow a ticket (core.Effect.TicketID): their order is the
// ticket's, then its follow-ups' in the order of its list
// (core.AttrFollowUps).
type Sequencer interface {
	// Neighbours returns, read strongly consistently, the ticket id of
	// the record id (id itself for a ticket's record; "" for an effect
	// that follows none) and the outbox ids of the records just before
	// and just after it in that order ("" where there is none; before is
	// the ticket's id for its first follow-up).
	Neighbours(ctx context.Context, id string) (ticket, before, after string, err error)
	// Wake makes the record id due at now if it is pending and has never
	// been sent or looked up (a follow-up that waits for its
	// predecessors); otherwise it changes nothing and returns nil.
	Wake(ctx context.Context, id string, now time.Time) error
}

var (
	// ErrNotClaimable: the ticket has no delivery record, is not due, is
	// held by another worker under a live lease, or is already final.
	ErrNotClaimable = errors.New("delivery: ticket not claimable")
	// ErrLeaseLost: the worker no longer holds the ticket (another worker
	// took it over after the lease ran out); nothing was recorded.
	ErrLeaseLost = errors.New("delivery: lease lost")
	// ErrNoRecord: no ticket with a delivery record under this id.
	ErrNoRecord = errors.New("delivery: no such ticket")
	// ErrUnreadable: the ticket was claimed (the lease is held) but its
	// arguments or stored fields cannot be read, so it can never be sent.
	// Claim returns it wrapping the cause, beside a Claimed whose Ticket
	// carries only the id and whose Before holds what could be read; the
	// engine records the ticket failed with the cause, so a person sees it
	// and it is not retried forever.
	ErrUnreadable = errors.New("delivery: ticket unreadable")
)

// Unreadable wraps cause as an ErrUnreadable for ticket id.
func Unreadable(id string, cause error) error {
	return fmt.Errorf("%w: ticket %s: %w", ErrUnreadable, id, cause)
}

// Outbox is what the engine needs of a store: the tickets waiting to be
// delivered, with their delivery records. Every write is conditional, so
// that two workers never hold one ticket at once.
type Outbox interface {
	// Due returns up to limit ids of tickets that can be claimed at now
	// (pending and due, or delivering with an expired lease), earliest due
	// first. It may return a ticket that is no longer claimable; Claim
	// decides.
	Due(ctx context.Context, now time.Time, limit int) ([]string, error)
	// Claim moves the ticket to delivering under the lease (owner,
	// leaseUntil), only if it is pending with DueAt <= now, or delivering
	// with LeaseUntil < now (times in whole seconds); else it returns
	// ErrNotClaimable. It sets DueAt to the second after leaseUntil, so an
	// abandoned claim is found again as soon as the lease has run out. When
	// the claim succeeded but the ticket cannot be read, it keeps the claim
	// and returns the Claimed with an error wrapping ErrUnreadable.
	Claim(ctx context.Context, id, owner string, now, leaseUntil time.Time) (Claimed, error)
	// Record writes u only if owner still holds the ticket (state
	// delivering, lease owner unchanged); else it returns ErrLeaseLost.
	Record(ctx context.Context, id, owner string, u Update) error
	// Delivery reads one ticket's delivery record, or returns ErrNoRecord.
	Delivery(ctx context.Context, id string) (Record, error)
}

// NewTicket builds the Ticket a destination receives from the stored
// ticket, its arguments read by core.ParseTicketArguments (an absent
// priority is core.DefaultPriority, as get_ticket shows it).
func NewTicket(t core.Ticket) (HelpdeskTicket, error) {
	a, err := core.ParseTicketArguments(t.Arguments)
	if err != nil {
		return HelpdeskTicket{}, fmt.Errorf("arguments: %w", err)
	}
	return HelpdeskTicket{ID: t.ID, OperationKey: t.OperationKey, TenantID: t.TenantID, UserID: t.UserID,
		Title: a.Title, Description: a.Description, Priority: a.Priority, CreatedAt: t.CreatedAt}, nil
}

// CeilSecond rounds t up to a whole second: due times are stored in epoch
// seconds and must never come earlier than asked.
func CeilSecond(t time.Time) time.Time {
	if tr := t.Truncate(time.Second); !tr.Equal(t) {
		return tr.Add(time.Second)
	}
	return t
}

// Neighbours is Sequencer.Neighbours's before and after of the record id
// among ticket's records: the ticket's own, then followUps (the ticket's
// core.AttrFollowUps) in order.
func Neighbours(ticket string, followUps []string, id string) (before, after string) {
	order := append([]string{ticket}, followUps...)
	for i, o := range order {
		if o != id {
			continue
		}
		if i > 0 {
			before = order[i-1]
		}
		if i+1 < len(order) {
			after = order[i+1]
		}
		return before, after
	}
	return "", ""
}

// Wakeable reports whether Sequencer.Wake moves r: pending, never sent,
// never looked up.
func Wakeable(r Record) bool {
	return r.State == StatePending && r.Attempts == 0 && r.LookupFailures == 0 && !r.SentUnknown
}
