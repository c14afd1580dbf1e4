package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// script is a scripted Destination: each Send and Lookup takes the next
// scripted answer (the last one repeats), and every call is counted.
type script struct {
	mu      sync.Mutex
	sends   []error // nil: created
	lookups []lookupAnswer
	nSend   int
	nLookup int
	keys    []string
}

type lookupAnswer struct {
	found bool
	err   error
}

func (s *script) Send(_ context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, t.ID)
	err := s.sends[min(s.nSend, len(s.sends)-1)]
	s.nSend++
	if err != nil {
		return delivery.Receipt{}, err
	}
	return delivery.Receipt{ExternalID: "ext-" + t.ID, ExternalURL: "https://helpdesk.test/" + t.ID}, nil
}

func (s *script) Lookup(_ context.Context, id string) (delivery.Receipt, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lookups) == 0 {
		panic("unscripted lookup")
	}
	a := s.lookups[min(s.nLookup, len(s.lookups)-1)]
	s.nLookup++
	if a.found {
		return delivery.Receipt{ExternalID: "found-" + id}, true, nil
	}
	return delivery.Receipt{}, false, a.err
}

func (s *script) counts() (sends, lookups int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nSend, s.nLookup
}

var (
	created    error
	notCreated = &delivery.SendError{Failure: delivery.NotCreated, Status: 429, Err: errors.New("too many requests")}
	unknown    = &delivery.SendError{Failure: delivery.Unknown, Status: 502, Err: errors.New("bad gateway")}
	refused    = &delivery.SendError{Failure: delivery.Refused, Status: 422, Err: errors.New("unprocessable")}
	// misconfigured is a 401: our credentials are refused.
	misconfigured = &delivery.SendError{Failure: delivery.Misconfigured, Status: 401, Err: errors.New("unauthorized")}
	absent        = lookupAnswer{}
	found         = lookupAnswer{found: true}
	noLookup      = lookupAnswer{err: delivery.ErrNoLookup}
	lookupErr     = lookupAnswer{err: errors.New("lookup timed out")}
)

type fixture struct {
	t     *testing.T
	store *memtest.Store
	dest  *script
	eng   *delivery.Engine
	now   time.Time
	n     int
}

func newFixture(t *testing.T, dest *script) *fixture {
	f := &fixture{t: t, store: memtest.New(), dest: dest, now: time.Date(2026, 12, 1, 3, 0, 0, 500e6, time.UTC)}
	f.eng = &delivery.Engine{
		Store: f.store, Destination: dest,
		Now:    func() time.Time { return f.now },
		Jitter: func(n int64) int64 { return n - 1 }, // the longest delay
	}
	return f
}

// ticket creates a ticket with a pending delivery record, due now.
func (f *fixture) ticket() string {
	f.t.Helper()
	id := fmt.Sprintf("ticket-%d", f.n+1)
	f.ticketWith(id, `{"title":"Printer on fire"}`)
	return id
}

// ticketWith creates ticket id with the given arguments text, pending and
// due now, under an operation of its own.
func (f *fixture) ticketWith(id, arguments string) {
	f.t.Helper()
	f.n++
	op := idem.Record{Key: fmt.Sprintf("%064d", f.n), State: idem.StateCompleted, Result: []byte(`{}`), ExpiresAt: f.now.Add(time.Hour)}
	_, err := f.store.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{{ID: id, OperationKey: op.Key,
		TenantID: "tenant-a", UserID: "alice", Arguments: arguments, CreatedAt: f.now,
		Delivery: &core.DeliveryStatus{State: core.DeliveryPending, DueAt: f.now.Truncate(time.Second)}}}}, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) deliver(id string) delivery.State {
	f.t.Helper()
	st, err := f.eng.Deliver(context.Background(), id)
	if err != nil {
		f.t.Fatalf("Deliver(%s): %v", id, err)
	}
	return st
}

func (f *fixture) record(id string) delivery.Record {
	f.t.Helper()
	r, err := f.store.Delivery(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// newTicketToFinal makes a ticket, delivers it until it is final and
// returns its record with the sends and lookups the destination saw.
func (f *fixture) newTicketToFinal() (r delivery.Record, sends, lookups int) {
	f.t.Helper()
	r = f.untilFinal(f.ticket())
	sends, lookups = f.dest.counts()
	return r, sends, lookups
}

// untilFinal runs the engine on id, moving the clock to each due time,
// until the ticket is final.
func (f *fixture) untilFinal(id string) delivery.Record {
	f.t.Helper()
	for range 100 {
		r := f.record(id)
		if !r.State.Live() {
			return r
		}
		if r.DueAt.After(f.now) {
			f.now = r.DueAt
		}
		f.deliver(id)
	}
	f.t.Fatalf("ticket %s not final after 100 steps", id)
	return delivery.Record{}
}

func TestDeliveredInOneSendAndTwoStoreCalls(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}})
	id := f.ticket()
	before := f.store.DeliveryCalls.Load()
	if st := f.deliver(id); st != delivery.StateDelivered {
		t.Fatalf("state = %s, want delivered", st)
	}
	if calls := f.store.DeliveryCalls.Load() - before; calls != 2 {
		t.Fatalf("store calls = %d, want 2 (claim, record)", calls)
	}
	r := f.record(id)
	if r.ExternalID != "ext-"+id || r.ExternalURL == "" || !r.DeliveredAt.Equal(f.now) || r.Attempts != 1 {
		t.Fatalf("record = %+v", r)
	}
	if sends, lookups := f.dest.counts(); sends != 1 || lookups != 0 {
		t.Fatalf("sends, lookups = %d, %d; want 1, 0", sends, lookups)
	}
	// Delivered is final: nothing claims it again.
	if _, err := f.eng.Deliver(context.Background(), id); !errors.Is(err, delivery.ErrNotClaimable) {
		t.Fatalf("second Deliver: %v, want ErrNotClaimable", err)
	}
	// get_ticket's view of it.
	tk, _ := f.store.Ticket(context.Background(), id)
	if tk.Delivery == nil || tk.Delivery.State != "delivered" || tk.Delivery.ExternalID != "ext-"+id {
		t.Fatalf("core view = %+v", tk.Delivery)
	}
}

func TestRefusedEndsFailedAfterOneAttempt(t *testing.T) {
	f := newFixture(t, &script{sends: []error{refused}})
	id := f.ticket()
	if st := f.deliver(id); st != delivery.StateFailed {
		t.Fatalf("state = %s, want failed", st)
	}
	r := f.record(id)
	if r.Attempts != 1 || !strings.Contains(r.Error, "422") {
		t.Fatalf("record = %+v", r)
	}
	if sends, _ := f.dest.counts(); sends != 1 {
		t.Fatalf("sends = %d, want 1", sends)
	}
}

func TestRetryAfterIsHonouredAndRoundedUp(t *testing.T) {
	ra := &delivery.SendError{Failure: delivery.NotCreated, Status: 429, RetryAfter: 90*time.Second + 200*time.Millisecond}
	f := newFixture(t, &script{sends: []error{ra, created}})
	id := f.ticket()
	if st := f.deliver(id); st != delivery.StatePending {
		t.Fatalf("state = %s, want pending", st)
	}
	r := f.record(id)
	earliest := f.now.Add(ra.RetryAfter)
	if r.DueAt.Before(earliest) || r.DueAt.Nanosecond() != 0 || r.DueAt.After(earliest.Add(time.Second)) {
		t.Fatalf("due = %v, want %v rounded up to the second", r.DueAt, earliest)
	}
	if r.SentUnknown || r.Attempts != 1 {
		t.Fatalf("record = %+v", r)
	}
	// Not due yet: nobody claims it.
	f.now = r.DueAt.Add(-time.Second)
	if _, err := f.eng.Deliver(context.Background(), id); !errors.Is(err, delivery.ErrNotClaimable) {
		t.Fatalf("early Deliver: %v, want ErrNotClaimable", err)
	}
	f.now = r.DueAt
	if st := f.deliver(id); st != delivery.StateDelivered {
		t.Fatalf("state = %s, want delivered", st)
	}
	if _, lookups := f.dest.counts(); lookups != 0 {
		t.Fatalf("lookups = %d: a 429 created nothing, no lookup needed", lookups)
	}
}

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	f := newFixture(t, &script{sends: []error{notCreated}})
	f.eng.BackoffBase, f.eng.BackoffMax = time.Second, 10*time.Second
	var jitters []int64
	f.eng.Jitter = func(n int64) int64 { jitters = append(jitters, n); return 0 } // the shortest delay
	id := f.ticket()
	var delays []time.Duration
	for range 6 {
		start := f.now
		f.deliver(id)
		r := f.record(id)
		delays = append(delays, r.DueAt.Sub(start))
		f.now = r.DueAt
	}
	// Shortest delay = half the ceiling (1, 2, 4, 8, 10, 10 s), rounded up.
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays = %v, want %v", delays, want)
		}
	}
	if len(jitters) != 6 || jitters[0] != int64(500*time.Millisecond)+1 {
		t.Fatalf("jitter asked for %v", jitters)
	}
}

func TestUnknownOutcomeLooksUpBeforeResending(t *testing.T) {
	t.Run("absent: resend with the same key", func(t *testing.T) {
		f := newFixture(t, &script{sends: []error{unknown, created}, lookups: []lookupAnswer{absent}})
		id := f.ticket()
		if st := f.deliver(id); st != delivery.StatePending || !f.record(id).SentUnknown {
			t.Fatalf("after unknown send: %s %+v", st, f.record(id))
		}
		r := f.untilFinal(id)
		sends, lookups := f.dest.counts()
		if r.State != delivery.StateDelivered || sends != 2 || lookups != 1 || r.Attempts != 2 {
			t.Fatalf("record %+v, sends %d, lookups %d", r, sends, lookups)
		}
		if f.dest.keys[0] != id || f.dest.keys[1] != id {
			t.Fatalf("keys = %v", f.dest.keys)
		}
	})
	t.Run("found: no resend", func(t *testing.T) {
		f := newFixture(t, &script{sends: []error{unknown}, lookups: []lookupAnswer{found}})
		id := f.ticket()
		f.deliver(id)
		r := f.untilFinal(id)
		sends, lookups := f.dest.counts()
		if r.State != delivery.StateDelivered || r.ExternalID != "found-"+id || sends != 1 || lookups != 1 {
			t.Fatalf("record %+v, sends %d, lookups %d", r, sends, lookups)
		}
	})
	t.Run("failed lookup: no send until a lookup answers", func(t *testing.T) {
		f := newFixture(t, &script{sends: []error{unknown, created}, lookups: []lookupAnswer{lookupErr, lookupErr, absent}})
		id := f.ticket()
		f.deliver(id)
		r := f.untilFinal(id)
		sends, lookups := f.dest.counts()
		if r.State != delivery.StateDelivered || sends != 2 || lookups != 3 || r.Attempts != 2 {
			t.Fatalf("record %+v, sends %d, lookups %d", r, sends, lookups)
		}
	})
	t.Run("no lookup: resend with the same key", func(t *testing.T) {
		f := newFixture(t, &script{sends: []error{unknown, created}, lookups: []lookupAnswer{noLookup}})
		id := f.ticket()
		r := f.untilFinal(id)
		if sends, _ := f.dest.counts(); r.State != delivery.StateDelivered || sends != 2 {
			t.Fatalf("record %+v, sends %d", r, sends)
		}
	})
}

func TestAttemptsExhausted(t *testing.T) {
	cases := []struct {
		name    string
		dest    *script
		want    delivery.State
		sends   int
		lookups int
	}{
		{"every send known not created: failed, no lookup",
			&script{sends: []error{notCreated}}, delivery.StateFailed, 8, 0},
		{"unknown sends, no lookup: unknown",
			&script{sends: []error{unknown}, lookups: []lookupAnswer{noLookup}}, delivery.StateUnknown, 8, 8},
		{"unknown sends, lookups absent: failed",
			&script{sends: []error{unknown}, lookups: []lookupAnswer{absent}}, delivery.StateFailed, 8, 8},
		{"unknown sends, final lookups fail: unknown once the lookups ran out",
			&script{sends: []error{unknown}, lookups: []lookupAnswer{absent, absent, absent, absent, absent, absent, absent, lookupErr}}, delivery.StateUnknown, 8, 15},
		{"unknown sends, final lookup finds it: delivered",
			&script{sends: []error{unknown}, lookups: []lookupAnswer{absent, absent, absent, absent, absent, absent, absent, found}}, delivery.StateDelivered, 8, 8},
		{"lookups failing for good: unknown, bounded",
			&script{sends: []error{unknown}, lookups: []lookupAnswer{lookupErr}}, delivery.StateUnknown, 1, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.dest)
			r, sends, lookups := f.newTicketToFinal()
			if r.State != c.want || sends != c.sends || lookups != c.lookups {
				t.Fatalf("state %s (%s), sends %d, lookups %d; want %s, %d, %d", r.State, r.Error, sends, lookups, c.want, c.sends, c.lookups)
			}
			if r.State != delivery.StateDelivered && (r.Error == "" || !r.DueAt.IsZero()) {
				t.Fatalf("final record = %+v", r)
			}
		})
	}
}

func TestMaxAttemptsCountsSendsOnly(t *testing.T) {
	f := newFixture(t, &script{sends: []error{unknown}, lookups: []lookupAnswer{absent}})
	f.eng.MaxAttempts = 3
	r, sends, lookups := f.newTicketToFinal()
	if r.State != delivery.StateFailed || r.Attempts != 3 || sends != 3 || lookups != 3 {
		t.Fatalf("record %+v, sends %d, lookups %d", r, sends, lookups)
	}
}

func TestLeaseExpiryTakeover(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}, lookups: []lookupAnswer{absent}})
	id := f.ticket()
	ctx := context.Background()
	// A worker claims the ticket and is stopped (killed, or stalled
	// mid-send) with its lease running.
	lease := f.now.Add(delivery.DefaultLease)
	if _, err := f.store.Claim(ctx, id, "dead-worker", f.now, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Deliver(ctx, id); !errors.Is(err, delivery.ErrNotClaimable) {
		t.Fatalf("Deliver under a live lease: %v, want ErrNotClaimable", err)
	}
	f.now = lease.Add(time.Second)
	// The dead worker may have sent as late as its lease's end: a lookup
	// now is inside that send's window, and its absent is not trusted.
	if st := f.deliver(id); st != delivery.StatePending {
		t.Fatalf("state = %s, want pending", st)
	}
	if r, end := f.record(id), delivery.CeilSecond(lease.Add(delivery.OutcomeWindow(0))); !r.SentUnknown || !r.DueAt.Equal(end) || r.Attempts != 1 {
		t.Fatalf("after the early lookup: %+v; want may be in the helpdesk, due %v, 1 attempt", r, end)
	}
	f.now = f.record(id).DueAt
	if st := f.deliver(id); st != delivery.StateDelivered {
		t.Fatalf("state = %s, want delivered", st)
	}
	sends, lookups := f.dest.counts()
	r := f.record(id)
	// The dead worker's possible send is counted and ruled out by a lookup
	// past its window.
	if sends != 1 || lookups != 2 || r.Attempts != 2 {
		t.Fatalf("record %+v, sends %d, lookups %d", r, sends, lookups)
	}
	// The old owner's late result is refused.
	if err := f.store.Record(ctx, id, "dead-worker", delivery.Update{State: delivery.StateFailed}); !errors.Is(err, delivery.ErrLeaseLost) {
		t.Fatalf("late Record: %v, want ErrLeaseLost", err)
	}
}

// A send that outlives its lease: another worker takes over, finds the
// ticket by lookup, and the slow worker's result is refused.
func TestLeaseRanOutMidSend(t *testing.T) {
	f := newFixture(t, nil)
	id := f.ticket()
	ctx := context.Background()
	var mu sync.Mutex
	f.dest = &script{lookups: []lookupAnswer{found}}
	slow := &blockingDest{script: f.dest, entered: make(chan struct{}), release: make(chan struct{})}
	f.eng.Destination = slow
	f.eng.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return f.now }
	done := make(chan error, 1)
	go func() { _, err := f.eng.Deliver(ctx, id); done <- err }()
	select {
	case <-slow.entered:
	case err := <-done:
		t.Fatalf("Deliver returned before sending: %v", err)
	}
	mu.Lock()
	f.now = f.now.Add(delivery.DefaultLease + 2*time.Second)
	mu.Unlock()
	other := *f.eng
	other.Destination = f.dest
	if st, err := other.Deliver(ctx, id); err != nil || st != delivery.StateDelivered {
		t.Fatalf("takeover: %s, %v", st, err)
	}
	close(slow.release)
	if err := <-done; !errors.Is(err, delivery.ErrLeaseLost) {
		t.Fatalf("slow worker: %v, want ErrLeaseLost", err)
	}
	if r := f.record(id); r.ExternalID != "found-"+id {
		t.Fatalf("record = %+v", r)
	}
}

type blockingDest struct {
	*script
	entered, release chan struct{}
}

func (b *blockingDest) Send(ctx context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	close(b.entered)
	<-b.release
	return delivery.Receipt{ExternalID: "late"}, nil
}

func TestNoDeliveryRecordIsNotClaimable(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}})
	op := idem.Record{Key: "k", State: idem.StateCompleted, Result: []byte(`{}`), ExpiresAt: f.now.Add(time.Hour)}
	if _, err := f.store.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{{ID: "plain", Arguments: `{"title":"x"}`}}}, f.now); err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Deliver(context.Background(), "plain"); !errors.Is(err, delivery.ErrNotClaimable) {
		t.Fatalf("Deliver: %v, want ErrNotClaimable", err)
	}
	ids, _ := f.store.Due(context.Background(), f.now.Add(time.Hour), 10)
	if len(ids) != 0 {
		t.Fatalf("due = %v", ids)
	}
}

func TestWorkerResumesAndWakes(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}})
	var mu sync.Mutex
	f.eng.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return f.now }
	left := f.ticket() // left pending by a previous process
	w := &delivery.Worker{Engine: f.eng, Poll: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitState(t, f, left, delivery.StateDelivered)
	mu.Lock()
	fresh := f.ticket()
	mu.Unlock()
	w.Notify() // the poll is an hour: only Notify can deliver it now
	waitState(t, f, fresh, delivery.StateDelivered)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}

func waitState(t *testing.T, f *fixture, id string, want delivery.State) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r, _ := f.store.Delivery(context.Background(), id); r.State == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r, _ := f.store.Delivery(context.Background(), id)
	t.Fatalf("ticket %s: state %s, want %s", id, r.State, want)
}

// gateDest holds the send of one ticket until released; others go through.
type gateDest struct {
	script
	hold    string
	entered chan struct{}
	release chan struct{}
}

func (g *gateDest) Send(ctx context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	if t.ID == g.hold {
		close(g.entered)
		<-g.release
	}
	return g.script.Send(ctx, t)
}

// A slow send does not hold back a fresh ticket; with every slot taken,
// the tickets left behind are picked up as soon as a slot frees, without
// waiting for the poll.
func TestWorkerSlowSendDoesNotBlockOthers(t *testing.T) {
	for _, conc := range []int{2, 1} {
		t.Run(fmt.Sprintf("concurrency %d", conc), func(t *testing.T) {
			f := newFixture(t, nil)
			var mu sync.Mutex
			f.eng.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return f.now }
			gate := &gateDest{script: script{sends: []error{created}}, entered: make(chan struct{}), release: make(chan struct{})}
			f.eng.Destination = gate
			mu.Lock()
			slow := f.ticket()
			mu.Unlock()
			gate.hold = slow
			// Each sweep of Run ends by reporting the waiting count: the
			// test's sign that the worker has been through a sweep.
			swept := make(chan struct{}, 8)
			w := &delivery.Worker{Engine: f.eng, Poll: time.Hour, Concurrency: conc,
				Waiting: func(context.Context, int) { swept <- struct{}{} }}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = w.Run(ctx) }()
			<-gate.entered
			<-swept // the first sweep, which started the slow send
			mu.Lock()
			fresh := f.ticket()
			mu.Unlock()
			w.Notify()
			if conc == 1 {
				// The worker has taken the Notify while its one slot is
				// busy (the sweep left the fresh ticket behind); only then
				// is the slot freed.
				<-swept
				if r := f.record(fresh); r.State != delivery.StatePending {
					t.Fatalf("fresh ticket with the slot busy: %s, want pending", r.State)
				}
				close(gate.release)
			}
			waitState(t, f, fresh, delivery.StateDelivered)
			if conc > 1 {
				if r, _ := f.store.Delivery(context.Background(), slow); r.State != delivery.StateDelivering {
					t.Fatalf("slow ticket: %s, want still delivering", r.State)
				}
				close(gate.release)
			}
			waitState(t, f, slow, delivery.StateDelivered)
		})
	}
}

func TestLeaseFor(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{0, delivery.DefaultLease},
		{10 * time.Second, 23 * time.Second},
		{2 * time.Second, 7 * time.Second},
		{time.Minute, delivery.MaxLease},
	} {
		if got := delivery.LeaseFor(c.timeout); got != c.want {
			t.Errorf("LeaseFor(%v) = %v, want %v", c.timeout, got, c.want)
		}
	}
}

// slowClaimStore's Claim takes advance on the engine's clock, as a claim
// queued for SQLite's write slot does.
type slowClaimStore struct {
	delivery.Outbox
	advance func()
}

func (s slowClaimStore) Claim(ctx context.Context, id, owner string, now, leaseUntil time.Time) (delivery.Claimed, error) {
	c, err := s.Outbox.Claim(ctx, id, owner, now, leaseUntil)
	s.advance()
	return c, err
}

// callsDest records the calls made to it and the deadline each carried.
type callsDest struct {
	mu          sync.Mutex
	calls       int
	deadline    time.Time // the last call's, on the real clock
	calledAt    time.Time // when it was read, on the real clock
	hasDeadline bool
}

func (d *callsDest) seen(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	d.calledAt = time.Now()
	d.deadline, d.hasDeadline = ctx.Deadline()
}

func (d *callsDest) Send(ctx context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	d.seen(ctx)
	return delivery.Receipt{ExternalID: "x"}, nil
}

func (d *callsDest) Lookup(ctx context.Context, _ string) (delivery.Receipt, bool, error) {
	d.seen(ctx)
	return delivery.Receipt{}, false, nil
}

// The calls under a lease end the margin before the lease does, counted
// from the lease (set before the claim), not from when the claim returned.
func TestCallsAreCutOffBeforeTheLeaseEnds(t *testing.T) {
	for _, c := range []struct {
		name          string
		lease, margin time.Duration
		claimTakes    time.Duration
	}{
		{"default lease, slow claim", delivery.DefaultLease, 3 * time.Second, 10 * time.Second},
		{"short lease keeps half for the calls", 2 * time.Second, time.Second, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.eng.Lease = c.lease
			dest := &callsDest{}
			f.eng.Destination = dest
			f.eng.Store = slowClaimStore{f.store, func() { f.now = f.now.Add(c.claimTakes) }}
			id := f.ticket()
			leaseUntil := delivery.CeilSecond(f.now.Add(c.lease))
			want := leaseUntil.Add(-c.margin)
			realBefore := time.Now()
			if st := f.deliver(id); st != delivery.StateDelivered {
				t.Fatalf("state = %s", st)
			}
			if dest.calls != 1 || !dest.hasDeadline {
				t.Fatalf("calls = %d, deadline set %v", dest.calls, dest.hasDeadline)
			}
			// The context runs on the real clock: the time it had left when
			// the engine set it, read back on the engine's clock (which did
			// not move after the claim), is the deadline the engine meant.
			// The engine set it between realBefore and the call.
			earliest := f.now.Add(dest.deadline.Sub(dest.calledAt))
			latest := f.now.Add(dest.deadline.Sub(realBefore))
			if want.Before(earliest) || want.After(latest) {
				t.Fatalf("calls' deadline on the engine's clock in [%v, %v], want %v (lease until %v)",
					earliest, latest, want, leaseUntil)
			}
		})
	}
}

// A claim that returns after the calls' deadline has passed calls nothing:
// the ticket is released, due at once, with no send counted.
func TestClaimPastTheCallsDeadlineReleasesTheTicket(t *testing.T) {
	for _, c := range []struct {
		name        string
		takeover    bool
		attempts    int
		sentUnknown bool
	}{
		{"fresh ticket", false, 0, false},
		// The predecessor's lapsed lease is still counted as a send.
		{"taken over after a lapsed lease", true, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			dest := &callsDest{}
			f.eng.Destination = dest
			id := f.ticket()
			if c.takeover {
				lease := f.now.Add(delivery.DefaultLease)
				if _, err := f.store.Claim(context.Background(), id, "dead-worker", f.now, lease); err != nil {
					t.Fatal(err)
				}
				f.now = lease.Add(time.Second)
			}
			leaseUntil := delivery.CeilSecond(f.now.Add(delivery.DefaultLease))
			f.eng.Store = slowClaimStore{f.store, func() { f.now = leaseUntil.Add(-3 * time.Second) }}
			if st := f.deliver(id); st != delivery.StatePending {
				t.Fatalf("state = %s, want pending", st)
			}
			if dest.calls != 0 {
				t.Fatalf("destination called %d times past the deadline", dest.calls)
			}
			r := f.record(id)
			if r.State != delivery.StatePending || !r.DueAt.Equal(delivery.CeilSecond(f.now)) || r.LeaseOwner != "" ||
				r.Attempts != c.attempts || r.SentUnknown != c.sentUnknown {
				t.Fatalf("record = %+v", r)
			}
			// Released: the next step, at its due time, delivers it.
			f.eng.Store = f.store
			f.now = r.DueAt
			if st := f.deliver(id); st != delivery.StateDelivered || dest.calls == 0 {
				t.Fatalf("next step: %s after %d calls", st, dest.calls)
			}
		})
	}
}

// A Retry-After beyond MaxRetryAfter is honoured only up to it.
func TestRetryAfterIsCapped(t *testing.T) {
	for _, ra := range []time.Duration{2 * time.Hour, time.Duration(math.MaxInt64)} {
		f := newFixture(t, &script{sends: []error{&delivery.SendError{Failure: delivery.NotCreated, Status: 429, RetryAfter: ra}}})
		id := f.ticket()
		if st := f.deliver(id); st != delivery.StatePending {
			t.Fatalf("state = %s, want pending", st)
		}
		if r, want := f.record(id), delivery.CeilSecond(f.now.Add(delivery.MaxRetryAfter)); !r.DueAt.Equal(want) {
			t.Fatalf("Retry-After %v: due %v, want %v", ra, r.DueAt, want)
		}
	}
}

// ctxDest honours its context, as the HTTP adapters do: a send whose
// context ends before the helpdesk answers has an unknown outcome.
type ctxDest struct{ gateDest }

func (g *ctxDest) Send(ctx context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	close(g.entered)
	select {
	case <-g.release:
	case <-ctx.Done():
		return delivery.Receipt{}, &delivery.SendError{Failure: delivery.Unknown, Err: ctx.Err()}
	}
	return g.script.Send(ctx, t)
}

// Stopping the worker (SIGTERM in the local server) starts nothing new but
// lets the delivery in flight finish and record its outcome: Run returns
// only after it, and the ticket is delivered, not left behind.
func TestWorkerStopLetsInFlightFinish(t *testing.T) {
	f := newFixture(t, nil)
	var mu sync.Mutex
	f.eng.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return f.now }
	gate := &ctxDest{gateDest{script: script{sends: []error{created}}, entered: make(chan struct{}), release: make(chan struct{})}}
	f.eng.Destination = gate
	mu.Lock()
	id := f.ticket()
	mu.Unlock()
	w := &delivery.Worker{Engine: f.eng, Poll: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-gate.entered
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Run returned %v with a send in flight", err)
	case <-time.After(50 * time.Millisecond): // ordering only: Run must still be waiting
	}
	mu.Lock()
	later := f.ticket() // committed after the stop: left pending for the next start
	mu.Unlock()
	w.Notify()
	close(gate.release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if r := f.record(id); r.State != delivery.StateDelivered || r.Attempts != 1 {
		t.Fatalf("in-flight ticket after the stop: %+v, want delivered", r)
	}
	if r := f.record(later); r.State != delivery.StatePending {
		t.Fatalf("ticket committed after the stop: %+v, want pending", r)
	}
}
