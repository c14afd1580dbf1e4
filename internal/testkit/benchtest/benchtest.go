// Package benchtest holds what the delivery benchmarks of the stores and of
// the delivery function share: the fake helpdesk's answer delay, a store
// wrapper timing each ticket from commit to delivered, and the local
// worker benchmark each store runs. Only benchmarks import it.
package benchtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/linear"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// HelpdeskDelay is how long the fake helpdesk takes to answer each
// create in the delivery benchmarks.
const HelpdeskDelay = 50 * time.Millisecond

// DeliveryTimer wraps a delivery.Outbox and notes when each ticket's
// delivered state was recorded, for the delivery benchmarks' latency.
type DeliveryTimer struct {
	delivery.Outbox
	mu   sync.Mutex
	done map[string]time.Time
}

// NewDeliveryTimer wraps s.
func NewDeliveryTimer(s delivery.Outbox) *DeliveryTimer {
	return &DeliveryTimer{Outbox: s, done: map[string]time.Time{}}
}

// Record implements delivery.Outbox, noting the time of a delivered state.
func (s *DeliveryTimer) Record(ctx context.Context, id, owner string, u delivery.Update) error {
	err := s.Outbox.Record(ctx, id, owner, u)
	if err == nil && u.State == delivery.StateDelivered {
		s.mu.Lock()
		s.done[id] = time.Now()
		s.mu.Unlock()
	}
	return err
}

// DeliveredAt is when id's delivered state was recorded; false while it
// has not been.
func (s *DeliveryTimer) DeliveredAt(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.done[id]
	return at, ok
}

// Delivered counts the tickets recorded delivered so far.
func (s *DeliveryTimer) Delivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.done)
}

// Report reports b.N tickets delivered over elapsed: tickets per second,
// the latency from each ticket's commit (committed) to its delivered
// record (p50, p99), and calls, the helpdesk calls made, per ticket.
func (s *DeliveryTimer) Report(b *testing.B, committed map[string]time.Time, elapsed time.Duration, calls int) {
	b.Helper()
	lat, _ := s.Latencies(committed)
	ReportFigures(b, b.N, elapsed, lat, calls)
}

// ReportFigures reports tickets delivered over elapsed as the delivery
// benchmarks do: tickets per second, the median and 99th percentile of
// lat (commit to delivered), and calls, the helpdesk calls made, per
// ticket.
func ReportFigures(b *testing.B, tickets int, elapsed time.Duration, lat []time.Duration, calls int) {
	b.Helper()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(tickets)/elapsed.Seconds(), "tickets/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(calls)/float64(tickets), "helpdesk-calls/ticket")
}

// SequencedTimer is a DeliveryTimer over a store that orders follow-ups
// (delivery.Sequencer), and keeps that order: the engine finds the
// Sequencer on the store it is given, so a plain DeliveryTimer would send
// a follow-up without waiting for its ticket and never move on to it.
type SequencedTimer struct {
	*DeliveryTimer
	seq delivery.Sequencer
}

// SequencedOutbox is an outbox that orders follow-ups.
type SequencedOutbox interface {
	delivery.Outbox
	delivery.Sequencer
}

// NewSequencedTimer wraps s.
func NewSequencedTimer(s SequencedOutbox) *SequencedTimer {
	return &SequencedTimer{DeliveryTimer: NewDeliveryTimer(s), seq: s}
}

// Neighbours implements delivery.Sequencer with the wrapped store's.
func (s *SequencedTimer) Neighbours(ctx context.Context, id string) (ticket, before, after string, err error) {
	return s.seq.Neighbours(ctx, id)
}

// Wake implements delivery.Sequencer with the wrapped store's.
func (s *SequencedTimer) Wake(ctx context.Context, id string, now time.Time) error {
	return s.seq.Wake(ctx, id, now)
}

var _ delivery.Sequencer = (*SequencedTimer)(nil)

// ReportLatency reports the median and 99th percentile of lat as
// prefix+"p50-ms" and prefix+"p99-ms".
func ReportLatency(b *testing.B, prefix string, lat []time.Duration) {
	b.Helper()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds())/1000, prefix+"p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, prefix+"p99-ms")
}

// LocalWorker: b.N callbacks commit tickets on s, back to back, while
// the in-process worker (as the local server runs it: woken by each
// commit, up to 32 sends at once) delivers them through the real webhook
// adapter to the fake helpdesk, which answers each create after
// HelpdeskDelay. Reports tickets delivered per second, the latency
// from commit to delivered (p50, p99), and helpdesk calls per ticket.
func LocalWorker(b *testing.B, s deliverytest.Adapter) {
	fake := fakehelpdesk.New(b, fakehelpdesk.Config{})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.WebhookCreate, Times: 1 << 30, Fault: fakehelpdesk.Fault{Delay: HelpdeskDelay}})
	dest, err := webhook.New(webhook.Config{URL: fake.WebhookURL(), Secret: fake.Config().Secret, Lookup: true})
	if err != nil {
		b.Fatal(err)
	}
	localWorker(b, s, fake, dest, fakehelpdesk.WebhookCreate, fakehelpdesk.WebhookLookup)
}

// LocalWorkerLinear is LocalWorker through the real Linear adapter to the
// fake's Linear API. With faults, the first tenth of the creates commit
// and then lose their answer (looked up, found), the next tenth are
// dropped before committing (looked up, absent, resent at once) and the
// next tenth are refused with RATELIMITED for a second (resent after the
// reset); the rest answer after HelpdeskDelay. helpdesk-calls/ticket counts
// creates and lookups: 1.00 without faults.
func LocalWorkerLinear(b *testing.B, s deliverytest.Adapter, faults bool) {
	fake := fakehelpdesk.New(b, fakehelpdesk.Config{})
	if tenth := b.N / 10; faults && tenth > 0 {
		fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearCreate, Times: tenth, Fault: fakehelpdesk.CommitThenDrop()})
		fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearCreate, Times: tenth, Fault: fakehelpdesk.Drop()})
		fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearCreate, Times: tenth, Fault: fakehelpdesk.LinearRateLimited(400, "Requests", time.Second)})
	}
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.LinearCreate, Times: 1 << 30, Fault: fakehelpdesk.Fault{Delay: HelpdeskDelay}})
	dest, err := linear.New(linear.Config{URL: fake.LinearURL(), TeamID: fake.Config().LinearTeamID, APIKey: fake.Config().LinearKey})
	if err != nil {
		b.Fatal(err)
	}
	localWorker(b, s, fake, dest, fakehelpdesk.LinearCreate, fakehelpdesk.LinearLookup)
}

// localWorker runs the local worker benchmark against dest, the fake's
// create and lookup kinds counting its helpdesk calls.
func localWorker(b *testing.B, s deliverytest.Adapter, fake *fakehelpdesk.Server, dest delivery.Destination, create, lookup fakehelpdesk.Kind) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := NewDeliveryTimer(s)
	w := &delivery.Worker{Engine: &delivery.Engine{Store: ts, Destination: dest}, Concurrency: 32}
	stopped := make(chan struct{})
	go func() { _ = w.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	n := 0
	svc := deliverytest.NewService(delivery.NotifyOnCommit(s, w.Notify), true,
		func() string { n++; return fmt.Sprintf("bench-%s-%d", run, n) })
	committed := make(map[string]time.Time, b.N)
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		out := svc.Answer(ctx, core.Call{Function: core.CreateTicket, Content: json.RawMessage(`{"title":"bench"}`),
			ExternalUserID: deliverytest.User, RequestID: fmt.Sprintf("r-%s-%d", run, i)})
		if out.Kind != core.KindCreated {
			b.Fatalf("create: %v %v", out.Kind, out.Err)
		}
		committed[coretest.TicketID(out)] = time.Now()
	}
	for deadline := time.Now().Add(2 * time.Minute); ts.Delivered() < b.N; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d delivered after two minutes", ts.Delivered(), b.N)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if fake.Total() != b.N {
		b.Fatalf("the fake holds %d tickets for %d callbacks", fake.Total(), b.N)
	}
	for id := range committed {
		if h := fake.Held(id); h != 1 {
			b.Fatalf("the fake holds %d tickets for %s, want 1", h, id)
		}
	}
	ts.Report(b, committed, elapsed, fake.Requests(create)+fake.Requests(lookup))
}

// Latencies returns, for each ticket of committed (id to commit time),
// the time from its commit to its delivered record, and the time the last
// of them was delivered. A ticket not delivered is left out.
func (s *DeliveryTimer) Latencies(committed map[string]time.Time) ([]time.Duration, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lat := make([]time.Duration, 0, len(committed))
	var last time.Time
	for id, at := range committed {
		done, ok := s.done[id]
		if !ok {
			continue
		}
		lat = append(lat, done.Sub(at))
		if done.After(last) {
			last = done
		}
	}
	return lat, last
}

// percentiles returns the median and the 99th percentile of lat (zero
// when it is empty); lat is sorted in place.
func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}
