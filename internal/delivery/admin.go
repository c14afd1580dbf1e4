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
// one conditional write that moves a ticket on only from the state the
// person saw. The transitions themselves (Retry, ResolveDelivered,
// ResolveResend) are decided here, once for every store.
type Admin interface {
	Delivery(ctx context.Context, id string) (Record, error)
	// List returns up to limit records in state, ordered by ticket id.
	List(ctx context.Context, state State, limit int) ([]Record, error)
	// Settle writes u only if the ticket's state is from; else it returns
	// ErrNoRecord (no delivery record) or a *StateError naming the state
	// it is in. A Pending update makes the ticket due at u.DueAt.
	Settle(ctx context.Context, id string, from State, u Update) error
}

// ErrWrongState: the ticket is not in the state the change needs.
var ErrWrongState = errors.New("delivery: ticket not in the state this change needs")

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
	return a.Settle(ctx, id, StateUnknown, Update{State: StateDelivered, ExternalID: r.ExternalID,
		ExternalURL: r.ExternalURL, DeliveredAt: now, Error: ""})
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
// first: from is final, so only a person changes it between the read and
// the conditional write, and a second person's change makes that write
// fail on the state.
func again(ctx context.Context, a Admin, id string, from State, now time.Time) error {
	r, err := a.Delivery(ctx, id)
	if err != nil {
		return err
	}
	if r.State != from {
		return &StateError{TicketID: id, State: r.State, Want: from}
	}
	return a.Settle(ctx, id, from, Update{State: StatePending, DueAt: now.Truncate(time.Second),
		SentUnknown: r.SentUnknown, SentAt: r.SentAt})
}
