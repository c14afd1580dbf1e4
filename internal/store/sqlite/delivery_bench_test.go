package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
)

// slowHelpdesk answers every send after a fixed delay.
type slowHelpdesk struct{ delay time.Duration }

func (d slowHelpdesk) Send(ctx context.Context, t delivery.Ticket) (delivery.Receipt, error) {
	select {
	case <-time.After(d.delay):
		return delivery.Receipt{ExternalID: "hd-" + t.ID}, nil
	case <-ctx.Done():
		return delivery.Receipt{}, &delivery.SendError{Outcome: delivery.Unknown, Err: ctx.Err()}
	}
}

func (slowHelpdesk) Lookup(context.Context, string) (delivery.Receipt, bool, error) {
	return delivery.Receipt{}, false, delivery.ErrNoLookup
}

// timedStore notes when each ticket's delivered state was recorded.
type timedStore struct {
	delivery.Store
	mu   sync.Mutex
	done map[string]time.Time
}

func (s *timedStore) Record(ctx context.Context, id, owner string, u delivery.Update) error {
	err := s.Store.Record(ctx, id, owner, u)
	if err == nil && u.State == delivery.StateDelivered {
		s.mu.Lock()
		s.done[id] = time.Now()
		s.mu.Unlock()
	}
	return err
}

// BenchmarkDeliveryLocalWorker: callbacks commit tickets on SQLite while
// the in-process worker, woken by each commit, delivers them to a helpdesk
// answering in 50 ms. Reports tickets delivered per second and the latency
// from commit to delivered (p50, p99).
func BenchmarkDeliveryLocalWorker(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.sqlite"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ts := &timedStore{Store: s, done: map[string]time.Time{}}
	w := &delivery.Worker{Engine: &delivery.Engine{Store: ts, Destination: slowHelpdesk{50 * time.Millisecond}}, Concurrency: 32}
	go func() { _ = w.Run(ctx) }()
	n := 0
	svc := &core.Service{Store: delivery.NotifyOnCommit(s, w.Notify), Users: memstore.Users{"u": {TenantID: "t", UserID: "alice"}},
		Policy: opkey.PolicyArguments, Retention: time.Hour, Deliver: true,
		NewID: func() string { n++; return fmt.Sprintf("bench-%d", n) }}
	committed := map[string]time.Time{}
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		out := svc.Answer(ctx, core.Call{Function: core.CreateTicket, Content: json.RawMessage(`{"title":"bench"}`),
			ExternalUserID: "u", RequestID: fmt.Sprintf("r%d", i)})
		if out.Kind != core.KindCreated {
			b.Fatalf("create: %v %v", out.Kind, out.Err)
		}
		committed[out.TicketID()] = time.Now()
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		ts.mu.Lock()
		done := len(ts.done)
		ts.mu.Unlock()
		if done == b.N {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d delivered after a minute", done, b.N)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	lat := make([]time.Duration, 0, b.N)
	for id, at := range committed {
		lat = append(lat, ts.done[id].Sub(at))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tickets/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
