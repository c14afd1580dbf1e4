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
	// ErrNotFound (no delivery record) or a *StateError naming the state
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
// attempts reset. Only a failed ticket can be retried.
func Retry(ctx context.Context, a Admin, id string, now time.Time) error {
	return a.Settle(ctx, id, StateFailed, Update{State: StatePending, DueAt: now.Truncate(time.Second)})
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
// checked): back to pending, due now, attempts reset, and no earlier send
// left to look up. Only an unknown ticket can be resolved.
func ResolveResend(ctx context.Context, a Admin, id string, now time.Time) error {
	return a.Settle(ctx, id, StateUnknown, Update{State: StatePending, DueAt: now.Truncate(time.Second)})
}
