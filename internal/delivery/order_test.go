package delivery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// orderDest is a destination that records what it was sent, in order,
// and can hold one effect's send until released.
type orderDest struct {
	mu      sync.Mutex
	sent    []string
	hold    string        // the effect id whose send waits for release
	holding chan struct{} // closed once the held send has started
	release chan struct{}
}

func (d *orderDest) Send(_ context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sent = append(d.sent, "ticket")
	return delivery.Receipt{ExternalID: "77"}, nil
}

func (d *orderDest) Lookup(context.Context, string) (delivery.Receipt, bool, error) {
	return delivery.Receipt{}, false, delivery.ErrNoLookup
}

func (d *orderDest) SendEffect(_ context.Context, e delivery.Effect) (delivery.Receipt, error) {
	if e.ID == d.hold {
		close(d.holding)
		<-d.release
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sent = append(d.sent, e.Kind+":"+e.ID)
	return delivery.Receipt{ExternalID: e.ID}, nil
}

func (d *orderDest) LookupEffect(context.Context, delivery.Effect) (delivery.Receipt, bool, error) {
	return delivery.Receipt{}, false, delivery.ErrNoLookup
}

func (d *orderDest) order() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.sent...)
}

// keyID is the delivery key of an outbox id.
func keyID(id string) string { return id[len(core.EffectKeyPrefix(core.KindComment)):] }

// TestMoveOnSeesAFollowUpCommittedDuringTheSend: a comment committed while
// the comment before it is being sent finds that one not final and waits;
// the worker that then settles it reads what follows once it has settled,
// and delivers the waiting comment at once, not at its recheck.
func TestMoveOnSeesAFollowUpCommittedDuringTheSend(t *testing.T) {
	st := memtest.New()
	e := deliverytest.NewEnv(t, st, true)
	ticket := e.Create(`{"title":"Cannot sign in"}`)
	first := e.Comment(ticket, "first")
	d := &orderDest{hold: keyID(first), holding: make(chan struct{}), release: make(chan struct{})}
	eng := &delivery.Engine{Store: st, Destination: d, Now: func() time.Time { return e.Now }}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { _, err := eng.Deliver(ctx, ticket); done <- err }() // the ticket, then moves on to the first comment
	<-d.holding
	second := e.Comment(ticket, "second")
	if st, err := eng.Deliver(ctx, second); err != nil || st != delivery.StatePending {
		t.Fatalf("the second comment while the first is sent: %s, %v; want pending, waiting", st, err)
	}
	if r := e.Record(second); r.Attempts != 0 || !r.DueAt.After(e.Now) {
		t.Fatalf("the waiting comment: %+v; want no attempt, due later", r)
	}
	close(d.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := e.Record(second); r.State != delivery.StateDelivered {
		t.Fatalf("the second comment after the first settled: %+v; want delivered at once", r)
	}
	if got, want := d.order(), []string{"ticket", "comment:" + keyID(first), "comment:" + keyID(second)}; !equal(got, want) {
		t.Fatalf("sent %v; want %v", got, want)
	}
}

// TestAFailedRecordDoesNotLetLaterOnesJumpTheQueue: a comment recorded
// failed lets the records after it go only once those before it are
// final: the close waits for the first comment even when the second one,
// just before it, failed.
func TestAFailedRecordDoesNotLetLaterOnesJumpTheQueue(t *testing.T) {
	st := memtest.New()
	e := deliverytest.NewEnv(t, st, true)
	ticket := e.Create(`{"title":"Cannot sign in"}`)
	first := e.Comment(ticket, "first")
	second := e.Comment(ticket, "second")
	closeID := e.CloseTicket(ticket, "")
	d := &orderDest{}
	eng := &delivery.Engine{Store: st, Destination: d, Now: func() time.Time { return e.Now }}
	ctx := context.Background()
	// The ticket is delivered (its record alone, no moving on), the first
	// comment backs off (claimed, released due later), and the second was
	// recorded failed without its turn (as one that cannot be read is).
	e.Finish(ticket, delivery.StateDelivered)
	e.Release(first, e.Now.Add(time.Hour))
	e.Finish(second, delivery.StateFailed)
	if st, err := eng.Deliver(ctx, closeID); err != nil || st != delivery.StatePending {
		t.Fatalf("the close with the first comment pending: %s, %v; want pending, waiting", st, err)
	}
	if r := e.Record(closeID); r.Attempts != 0 || r.Error != "waiting for "+first {
		t.Fatalf("the close: %+v; want waiting for %s, no attempt", r, first)
	}
	if got := d.order(); len(got) != 0 {
		t.Fatalf("sent %v; want nothing yet", got)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
