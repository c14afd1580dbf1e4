package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
)

// CheckSettleStale checks a person's Settle from a record read in a state
// the ticket has since left (a second person retried it in between): the
// store refuses it with a *delivery.StateError naming the state the ticket
// is in and the state read, and the record stays as the retry left it.
// deliverytest's admin cases reach a store's Settle only from a fresh
// read, or from a stale one in the same state (ErrChanged).
func CheckSettleStale(t *testing.T, s deliverytest.Adapter) {
	t.Helper()
	ctx := context.Background()
	e := deliverytest.NewEnv(t, s, true)
	id := e.Create(`{"title":"settled from a stale read"}`)
	e.Finish(id, delivery.StateFailed)
	read := e.Record(id)
	if err := delivery.Retry(ctx, s, id, e.Now); err != nil {
		t.Fatal(err)
	}
	err := s.Settle(ctx, id, read, delivery.Update{State: delivery.StatePending, DueAt: e.Now.Add(time.Hour).Truncate(time.Second)})
	var se *delivery.StateError
	if !errors.As(err, &se) || se.TicketID != id || se.State != delivery.StatePending || se.Want != delivery.StateFailed {
		t.Fatalf("Settle from a failed record of a ticket retried since: %v, want a StateError (pending, not failed)", err)
	}
	if r := e.Record(id); r.State != delivery.StatePending || !r.DueAt.Equal(e.Now.Truncate(time.Second)) {
		t.Fatalf("refused, yet the record is %+v; want the retry's, due at %v", r, e.Now.Truncate(time.Second))
	}
}
