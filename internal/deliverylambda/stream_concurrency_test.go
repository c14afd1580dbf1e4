package deliverylambda_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
)

// watchedClaims counts the deliveries of a batch in flight (from claim to
// record), remembers each claim's lease owner, refuses the claims of the
// tickets in fail as a throttled store would, and holds each other claim
// until together tickets are in flight at once (or a few seconds passed),
// and a moment more, so the test sees whether they are delivered side by
// side, and no more of them at once than the bound.
type watchedClaims struct {
	delivery.Outbox
	fail     map[string]bool
	together int

	mu       sync.Mutex
	inflight int
	most     int
	owners   map[string]string // ticket id -> lease owner
	arrived  int
	allThere chan struct{}
}

func (w *watchedClaims) Claim(ctx context.Context, id, owner string, now, leaseUntil time.Time) (delivery.Claimed, error) {
	w.mu.Lock()
	w.inflight++
	w.most = max(w.most, w.inflight)
	if w.fail[id] {
		w.inflight--
		w.mu.Unlock()
		return delivery.Claimed{}, errors.New("ProvisionedThroughputExceededException")
	}
	w.owners[id] = owner
	w.arrived++
	if w.arrived == w.together {
		close(w.allThere)
	}
	w.mu.Unlock()
	select {
	case <-w.allThere:
		// A moment more in flight, so that a delivery beyond the bound
		// would be seen beside them.
		time.Sleep(100 * time.Millisecond)
	case <-time.After(5 * time.Second):
	}
	return w.Outbox.Claim(ctx, id, owner, now, leaseUntil)
}

func (w *watchedClaims) Record(ctx context.Context, id, owner string, u delivery.Update) error {
	err := w.Outbox.Record(ctx, id, owner, u)
	w.mu.Lock()
	w.inflight--
	w.mu.Unlock()
	return err
}

// TestStreamBatchSideBySide: the tickets of one stream batch are delivered
// side by side, at most deliverylambda.DefaultConcurrency at once, each
// under a lease of its own; the records whose step failed are reported by
// sequence number, exactly those, while the others are delivered once.
func TestStreamBatchSideBySide(t *testing.T) {
	// Two tickets more than the bound are delivered, two others fail.
	const n = deliverylambda.DefaultConcurrency + 4
	var w *watchedClaims
	f := newFixture(t, func(s delivery.Outbox) delivery.Outbox {
		w = &watchedClaims{Outbox: s, fail: map[string]bool{}, together: deliverylambda.DefaultConcurrency,
			owners: map[string]string{}, allThere: make(chan struct{})}
		return w
	})
	var recs []rec
	var ids []string
	var wantFailed []string
	for i := range n {
		id := f.env.Create(fmt.Sprintf(`{"title":"side by side %d"}`, i))
		ids = append(ids, id)
		seq := fmt.Sprint(100 + i)
		if i == 3 || i == 7 {
			w.fail[id] = true
			wantFailed = append(wantFailed, seq)
		}
		recs = append(recs, rec{seq, "INSERT", f.image(t, "TICKET#"+id)})
	}
	got := failures(t, f.handle(t, batch(t, recs...)))
	slices.Sort(got)
	if !slices.Equal(got, wantFailed) {
		t.Errorf("batch item failures %v, want exactly %v", got, wantFailed)
	}
	if w.most != deliverylambda.DefaultConcurrency {
		t.Errorf("at most %d deliveries of the batch in flight at once, want %d (side by side, bounded)", w.most, deliverylambda.DefaultConcurrency)
	}
	owners := map[string]bool{}
	for _, o := range w.owners {
		owners[o] = true
	}
	if len(w.owners) != n-2 || len(owners) != n-2 {
		t.Errorf("%d claims under %d lease owners, want %d each: one lease per ticket", len(w.owners), len(owners), n-2)
	}
	for _, id := range ids {
		want, st := 1, delivery.StateDelivered
		if w.fail[id] {
			want, st = 0, delivery.StatePending
		}
		if f.fake.Held(id) != want || f.env.Record(id).State != st {
			t.Errorf("%s: the helpdesk holds %d, the record is %s; want %d, %s", id, f.fake.Held(id), f.env.Record(id).State, want, st)
		}
	}
}
