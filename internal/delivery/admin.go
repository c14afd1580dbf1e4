package delivery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Admin is what a person's tools need of a store, beside reading one
// ticket's record (Store.Delivery): listing tickets by delivery state, and
// one conditional write that moves a ticket on only from the record the
// person's tool read. The transitions themselves (Retry, ResolveDelivered,
// ResolveResend) are decided here, once for every store.
type Admin interface {
	Delivery(ctx context.Context, id string) (Record, error)
	// List returns up to limit records in state, ordered by ticket id.
	List(ctx context.Context, state State, limit int) ([]Record, error)
	// Settle writes u only if the ticket's record is still read: in
	// read.State, with read's attempts, failed lookups, "may be in the
	// helpdesk" and send start (a ticket that went round another cycle
	// since it was read differs in one of them). Else it returns
	// ErrNoRecord (no delivery record), a *StateError naming the state it
	// is in, or, in the same state, an error that Is ErrChanged. A Pending
	// update makes the ticket due at u.DueAt.
	Settle(ctx context.Context, id string, read Record, u Update) error
}

// ErrWrongState: the ticket is not in the state the change needs.
var ErrWrongState = errors.New("delivery: ticket not in the state this change needs")

// ErrChanged: the ticket is in the state the change needs, but its record
// changed since it was read (it went round another delivery cycle): the
// change was refused, so that it cannot write back an older send's start.
var ErrChanged = errors.New("delivery: the ticket's record changed since it was read: refused, nothing changed; run the command again")

// Changed is the error of a Settle refused because the record changed
// since it was read, for ticket id.
func Changed(id string) error {
	return fmt.Errorf("delivery: ticket %s: %w", id, ErrChanged)
}

// Refusal is the error of a Settle of ticket id refused because its
// record, now r, is no longer the one read: a *StateError when it left
// read.State, else Changed.
func Refusal(id string, r, read Record) error {
	if r.State != read.State {
		return &StateError{TicketID: id, State: r.State, Want: read.State}
	}
	return Changed(id)
}

// SameAsRead reports whether the record r is still the one read, as
// Settle compares them: state, attempts, failed lookups, "may be in the
// helpdesk" and send start.
func SameAsRead(r, read Record) bool {
	return r.State == read.State && r.Attempts == read.Attempts && r.LookupFailures == read.LookupFailures &&
		r.SentUnknown == read.SentUnknown && r.SentAt.Equal(read.SentAt)
}

// StateError is a change refused because of the ticket's state.
type StateError struct {
	TicketID string
	State    State // the state it is in
	Want     State // the state the change needs
}

func (e *StateError) Error() string {
	return fmt.Sprintf("delivery: ticket %s is %s, not %s: refused, nothing changed", e.TicketID, e.State, e.Want)
}

// Is makes errors.Is(err, ErrWrongState) true.
func (e *StateError) Is(target error) bool { return target == ErrWrongState }

// Retry sends a failed ticket again: back to pending, due now, with its
// attempts and failed lookups reset. What it knows of earlier sends is
// kept: a ticket an earlier send may have created is looked up first, and
// resent only when a lookup made after that send's outcome window answers
// absent. Only a failed ticket can be retried.
func Retry(ctx context.Context, a Admin, id string, now time.Time) error {
	return again(ctx, a, id, StateFailed, now)
}

// ResolveDelivered settles an unknown ticket as delivered, with the id (and
// URL, when given) a person found in the helpdesk under the ticket id.
// Only an unknown ticket can be resolved.
func ResolveDelivered(ctx context.Context, a Admin, id string, r Receipt, now time.Time) error {
	if strings.TrimSpace(r.ExternalID) == "" {
		return errors.New("delivery: resolving as delivered needs the helpdesk's id")
	}
	read, err := readIn(ctx, a, id, StateUnknown)
	if err != nil {
		return err
	}
	if err := a.Settle(ctx, id, read, Update{State: StateDelivered, ExternalID: r.ExternalID,
		ExternalURL: r.ExternalURL, DeliveredAt: now, Error: ""}); err != nil {
		return err
	}
	return wakeNext(ctx, a, id, now)
}

// wakeNext makes the record after id in its ticket's order due at now,
// when the store orders records (Sequencer): it waited for id, which a
// person just settled, and the next worker or sweep takes it at once.
func wakeNext(ctx context.Context, a Admin, id string, now time.Time) error {
	seq, ok := a.(Sequencer)
	if !ok {
		return nil
	}
	_, _, after, err := seq.Neighbours(ctx, id)
	if err != nil || after == "" {
		return err
	}
	return seq.Wake(ctx, after, now)
}

// ResolveFailed settles an unknown record as failed: a person checked that
// the helpdesk does not hold it and decided it is not to be sent (its
// follow-ups then fail too). why is kept as its error. Only an unknown
// record can be resolved.
func ResolveFailed(ctx context.Context, a Admin, id, why string, now time.Time) error {
	read, err := readIn(ctx, a, id, StateUnknown)
	if err != nil {
		return err
	}
	if err := a.Settle(ctx, id, read, Update{State: StateFailed, Attempts: read.Attempts, LookupFailures: read.LookupFailures,
		Error: "resolved failed by a person: " + why}); err != nil {
		return err
	}
	return wakeNext(ctx, a, id, now)
}

// ResolveResend settles an unknown ticket as not in the helpdesk (a person
// checked): back to pending, due now, attempts reset. What it knows of
// earlier sends is kept, as by Retry: where the destination can be
// queried the engine still looks the ticket up before sending, so a
// person's check made too early, or mistaken, cannot make a second ticket.
// Only an unknown ticket can be resolved.
func ResolveResend(ctx context.Context, a Admin, id string, now time.Time) error {
	return again(ctx, a, id, StateUnknown, now)
}

// again moves a ticket in state from back to pending, due now, with fresh
// counts and its knowledge of earlier sends kept. The record is read
// first, and the write is conditional on it: between the two another
// person may have put the ticket back and a worker taken it round a whole
// cycle to the same state, with a later send; writing back the send start
// read would then date that later send too early, and a lookup could rule
// it out inside its window.
func again(ctx context.Context, a Admin, id string, from State, now time.Time) error {
	r, err := readIn(ctx, a, id, from)
	if err != nil {
		return err
	}
	return a.Settle(ctx, id, r, Update{State: StatePending, DueAt: now.Truncate(time.Second),
		SentUnknown: r.SentUnknown, SentAt: r.SentAt})
}

// readIn reads id's record and checks that it is in state want.
func readIn(ctx context.Context, a Admin, id string, want State) (Record, error) {
	r, err := a.Delivery(ctx, id)
	if err != nil {
		return Record{}, err
	}
	if r.State != want {
		return Record{}, &StateError{TicketID: id, State: r.State, Want: want}
	}
	return r, nil
}
