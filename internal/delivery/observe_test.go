package delivery_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// steps collects what an Observer is told.
type steps struct {
	mu  sync.Mutex
	all []delivery.Step
}

func (s *steps) StepEnded(_ context.Context, st delivery.Step) {
	s.mu.Lock()
	s.all = append(s.all, st)
	s.mu.Unlock()
}

func (s *steps) list() []delivery.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery.Step(nil), s.all...)
}

// TestObserverSeesEachRecordedStep: the observer is told once per
// recorded step, with the result as it is counted (a step back to pending
// is retried), the attempts, and for a delivered ticket the lag from its
// commit to its delivery.
func TestObserverSeesEachRecordedStep(t *testing.T) {
	cases := []struct {
		name     string
		dest     *script
		max      int
		want     []delivery.Result
		sends    int
		attempts []int // after each step; 1, 2, ... when nil
	}{
		{"delivered at once", &script{sends: []error{created}}, 0, []delivery.Result{delivery.ResultDelivered}, 1, nil},
		{"refused: failed", &script{sends: []error{refused}}, 0, []delivery.Result{delivery.ResultFailed}, 1, nil},
		{"retried, then delivered", &script{sends: []error{notCreated, notCreated, created}}, 0,
			[]delivery.Result{delivery.ResultRetried, delivery.ResultRetried, delivery.ResultDelivered}, 3, nil},
		{"unknown sends, final lookup fails: retried, then unknown",
			&script{sends: []error{unknown}, lookups: []lookupAnswer{absent, lookupErr}}, 2,
			[]delivery.Result{delivery.ResultRetried, delivery.ResultRetried, delivery.ResultUnknown}, 2, []int{1, 2, 2}},
		{"credentials refused: misconfigured, then delivered",
			&script{sends: []error{misconfigured, created}}, 0,
			[]delivery.Result{delivery.ResultMisconfigured, delivery.ResultDelivered}, 2, []int{0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.dest)
			f.eng.MaxAttempts = c.max
			f.eng.MaxLookups = 1
			obs := &steps{}
			f.eng.Observer = obs
			created := f.now
			id := f.ticket()
			f.now = f.now.Add(2500 * time.Millisecond) // the worker comes later
			r := f.untilFinal(id)
			got := obs.list()
			if len(got) != len(c.want) {
				t.Fatalf("observer told %d steps %+v, want %d", len(got), got, len(c.want))
			}
			for i, s := range got {
				attempts := i + 1
				if c.attempts != nil {
					attempts = c.attempts[i]
				}
				if s.Result != c.want[i] || s.TicketID != id || s.Attempts != attempts {
					t.Errorf("step %d: %s %s attempts %d, want %s %s attempts %d", i, s.TicketID, s.Result, s.Attempts, id, c.want[i], attempts)
				}
				if (s.Result == delivery.ResultRetried || s.Result == delivery.ResultMisconfigured) && (s.State != delivery.StatePending || s.DueAt.IsZero()) {
					t.Errorf("step %d retried: state %s due %v, want pending with a due time", i, s.State, s.DueAt)
				}
				if s.Result != delivery.ResultDelivered && s.Lag != 0 {
					t.Errorf("step %d %s: lag %v, want 0", i, s.Result, s.Lag)
				}
			}
			last := got[len(got)-1]
			if string(last.Result) != string(r.State) {
				t.Errorf("last step %s, record %s", last.Result, r.State)
			}
			if last.Result == delivery.ResultDelivered {
				if want := r.DeliveredAt.Sub(created); last.Lag != want || want <= 0 {
					t.Errorf("lag %v, want %v (commit to delivery)", last.Lag, want)
				}
			}
			if sends, _ := f.dest.counts(); sends != c.sends {
				t.Errorf("sends %d, want %d", sends, c.sends)
			}
		})
	}
}

// lostLease refuses every Record, as when another worker took over.
type lostLease struct{ delivery.Outbox }

func (lostLease) Record(context.Context, string, string, delivery.Update) error {
	return delivery.ErrLeaseLost
}

// TestObserverNotToldOfUnrecordedSteps: a step whose outcome was not
// recorded is not over and is not reported.
func TestObserverNotToldOfUnrecordedSteps(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}})
	obs := &steps{}
	f.eng.Observer = obs
	f.eng.Store = lostLease{f.store}
	id := f.ticket()
	if _, err := f.eng.Deliver(context.Background(), id); !errors.Is(err, delivery.ErrLeaseLost) {
		t.Fatalf("Deliver: %v, want ErrLeaseLost", err)
	}
	if got := obs.list(); len(got) != 0 {
		t.Fatalf("observer told %+v, want nothing", got)
	}
}

// TestWorkerReportsWaiting: Run counts the waiting tickets after its
// sweeps (pending, backing off or delivering; not the final ones) and
// reports them.
func TestWorkerReportsWaiting(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}})
	var mu sync.Mutex
	f.eng.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return f.now }
	later := f.ticket()
	// later backs off for an hour; delivered is delivered at once.
	c, err := f.store.Claim(context.Background(), later, "w0", f.now, f.now.Add(time.Minute))
	if err != nil || c.Ticket.ID != later {
		t.Fatal(err)
	}
	if err := f.store.Record(context.Background(), later, "w0", delivery.Update{State: delivery.StatePending, Attempts: 1, DueAt: f.now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	delivered := f.ticket()
	counts := make(chan int, 100)
	w := &delivery.Worker{Engine: f.eng, Poll: 5 * time.Millisecond,
		Waiting: func(_ context.Context, n int) { counts <- n }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitState(t, f, delivered, delivery.StateDelivered)
	deadline := time.After(5 * time.Second)
	for n := -1; n != 1; {
		select {
		case n = <-counts:
		case <-deadline:
			t.Fatalf("waiting never reported as 1 (the ticket backing off)")
		}
	}
	cancel()
	<-done
}

// TestWorkerCountsAtMostEveryCountEvery: with CountEvery, many sweeps
// make one count.
func TestWorkerCountsAtMostEveryCountEvery(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}})
	var reports sync.WaitGroup
	var mu sync.Mutex
	n := 0
	w := &delivery.Worker{Engine: f.eng, Poll: time.Millisecond, CountEvery: time.Hour,
		Waiting: func(context.Context, int) { mu.Lock(); n++; mu.Unlock() }}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	reports.Go(func() { _ = w.Run(ctx) })
	reports.Wait()
	if n != 1 {
		t.Fatalf("%d counts reported over many sweeps with CountEvery an hour, want 1", n)
	}
}

// TestCountWaitingNeedsACounter: a store that cannot count says so.
func TestCountWaitingNeedsACounter(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}})
	if _, err := delivery.CountWaiting(context.Background(), lostLease{f.store}); !errors.Is(err, delivery.ErrNoCount) {
		t.Fatalf("CountWaiting on a store without Waiting: %v, want ErrNoCount", err)
	}
	f.ticket()
	if n, err := delivery.CountWaiting(context.Background(), f.store); err != nil || n != 1 {
		t.Fatalf("CountWaiting = %d, %v; want 1", n, err)
	}
}
