package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultPoll is how often a Worker looks for due tickets when nothing
// wakes it.
const DefaultPoll = 500 * time.Millisecond

// Worker runs the Engine in-process, for the local server: woken by Notify
// after each commit, polling for due tickets at least every Poll, and at
// start picking up whatever a previous process left pending or delivering
// (a delivering ticket once its lease has run out). Deliveries run side by
// side, so one slow helpdesk call never holds back the pick-up of a fresh
// ticket.
type Worker struct {
	Engine *Engine
	// Poll is the longest wait between two sweeps (DefaultPoll when zero;
	// keep it at most a second, so a ticket is picked up within a second
	// of its due time).
	Poll time.Duration
	// Concurrency bounds the tickets delivered at once (16 when zero).
	Concurrency int
	// Log receives one line per failed step; never credentials.
	Log *slog.Logger
	// Waiting, when set, receives how many tickets wait to be delivered
	// (pending, due or backing off, or delivering: see WaitingCounter),
	// counted by the store after a sweep of Run, at most once every
	// CountEvery (at every sweep when zero). A store that cannot count
	// (ErrNoCount) is not asked again.
	Waiting func(ctx context.Context, n int)
	// CountEvery spaces the counts for Waiting.
	CountEvery time.Duration

	once      sync.Once
	wake      chan struct{}
	slots     chan struct{}
	mu        sync.Mutex
	inflight  map[string]bool
	saturated bool // the last dispatch left due tickets behind
	wg        sync.WaitGroup
}

func (w *Worker) init() {
	w.once.Do(func() {
		n := w.Concurrency
		if n <= 0 {
			n = 16
		}
		w.wake = make(chan struct{}, 1)
		w.slots = make(chan struct{}, n)
		w.inflight = map[string]bool{}
	})
}

// Notify wakes the worker for a sweep; it never blocks.
func (w *Worker) Notify() {
	w.init()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run sweeps until ctx ends, then waits for the deliveries in flight and
// returns ctx's error. Ending ctx starts no new delivery but does not cut
// the ones in flight short: each finishes its calls (bounded by the lease)
// and records its outcome, so a shutdown leaves no ticket behind that it
// could have finished; a ticket it could not record stays claimable.
func (w *Worker) Run(ctx context.Context) error {
	w.init()
	poll := w.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	inflight := context.WithoutCancel(ctx)
	timer := time.NewTimer(0) // the first sweep resumes what was left
	defer timer.Stop()
	counter := waitingCounter{w: w}
	for {
		select {
		case <-ctx.Done():
			w.wg.Wait()
			return ctx.Err()
		case <-w.wake:
		case <-timer.C:
		}
		if ctx.Err() != nil {
			continue
		}
		w.dispatch(inflight)
		counter.count(ctx)
		timer.Reset(poll)
	}
}

// waitingCounter reports the count of waiting tickets to w.Waiting at
// most every w.CountEvery.
type waitingCounter struct {
	w    *Worker
	last time.Time
	off  bool // the store cannot count
}

func (c *waitingCounter) count(ctx context.Context) {
	w := c.w
	if w.Waiting == nil || c.off {
		return
	}
	now := time.Now()
	if !c.last.IsZero() && now.Sub(c.last) < w.CountEvery {
		return
	}
	c.last = now
	n, err := CountWaiting(ctx, w.Engine.Store)
	switch {
	case errors.Is(err, ErrNoCount):
		c.off = true
	case err != nil:
		w.logFailure("count waiting tickets", "", err)
	default:
		w.Waiting(ctx, n)
	}
}

// maxDueQuery bounds the ids one Due query of Drain asks for.
const maxDueQuery = 1000

// Drain delivers the tickets that are due, up to Concurrency at once,
// claiming the next as soon as a slot frees up (never waiting for the
// slowest of a round), for as long as more reports true (asked before
// each claim; nil means always) and tickets are due or in flight. It
// waits for the deliveries it started and returns how many steps it
// recorded. A Due query that fails ends the drain (once the deliveries in
// flight are over) with that error: a sweep that cannot see its tickets
// must say so. A ticket whose step in this drain was refused (held by
// another worker, already final, or a failed step, which is logged) is
// not taken again by the same drain; the next one finds it.
func (w *Worker) Drain(ctx context.Context, more func() bool) (int, error) {
	w.init()
	var (
		moved  atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex // guards skip
		skip   = map[string]bool{}
		freed  = make(chan struct{}, 1) // a delivery of this drain ended
		mine   atomic.Int64             // deliveries of this drain in flight
		failed error
	)
	canClaim := func() bool { return ctx.Err() == nil && (more == nil || more()) }
sweep:
	for canClaim() {
		w.mu.Lock()
		busy := len(w.inflight)
		w.mu.Unlock()
		mu.Lock()
		limit := min(cap(w.slots)+busy+len(skip), maxDueQuery)
		mu.Unlock()
		ids, err := w.Engine.Store.Due(ctx, w.Engine.now(), limit)
		if err != nil {
			failed = fmt.Errorf("find due tickets: %w", err)
			break
		}
		started := 0
		for _, id := range ids {
			w.mu.Lock()
			taken := w.inflight[id]
			w.mu.Unlock()
			mu.Lock()
			taken = taken || skip[id]
			mu.Unlock()
			if taken {
				continue
			}
			acquired := false
			select {
			case w.slots <- struct{}{}:
				acquired = true
			case <-ctx.Done():
			}
			if !acquired || !canClaim() {
				if acquired {
					<-w.slots
				}
				break sweep
			}
			w.mu.Lock()
			w.inflight[id] = true
			w.mu.Unlock()
			started++
			mine.Add(1)
			wg.Go(func() {
				u, err := w.Engine.deliverOn(ctx, id)
				if w.noteOutcome(id, u, err) {
					moved.Add(1)
				}
				if err != nil {
					mu.Lock()
					skip[id] = true
					mu.Unlock()
				}
				w.mu.Lock()
				delete(w.inflight, id)
				w.mu.Unlock()
				<-w.slots
				mine.Add(-1)
				select {
				case freed <- struct{}{}:
				default:
				}
			})
		}
		if started > 0 {
			continue // the query may have been cut at limit: ask again
		}
		if mine.Load() == 0 {
			break // nothing due that this drain may take, and none in flight
		}
		select { // everything due is in flight: wait for one to end
		case <-freed:
		case <-ctx.Done():
		}
	}
	wg.Wait()
	return int(moved.Load()), failed
}

// dispatch starts a delivery for each due ticket not already in flight,
// while slots are free.
func (w *Worker) dispatch(ctx context.Context) {
	limit := cap(w.slots) - len(w.slots)
	if limit <= 0 {
		w.setSaturated(true)
		return
	}
	ids, err := w.Engine.Store.Due(ctx, w.Engine.now(), limit+len(w.slots))
	if err != nil {
		w.logFailure("find due tickets", "", err)
		return
	}
	left := false
	for _, id := range ids {
		w.mu.Lock()
		busy := w.inflight[id]
		w.mu.Unlock()
		if busy {
			continue
		}
		select {
		case w.slots <- struct{}{}:
		default:
			left = true
		}
		if left {
			break
		}
		w.mu.Lock()
		w.inflight[id] = true
		w.mu.Unlock()
		w.wg.Go(func() {
			u, err := w.Engine.deliverOn(ctx, id)
			w.mu.Lock()
			delete(w.inflight, id)
			again := w.saturated
			w.saturated = false
			w.mu.Unlock()
			<-w.slots
			w.noteOutcome(id, u, err)
			if again {
				w.Notify() // tickets were left behind for want of a slot
			}
		})
	}
	w.setSaturated(left)
}

func (w *Worker) setSaturated(v bool) {
	w.mu.Lock()
	w.saturated = w.saturated || v
	w.mu.Unlock()
}

// logFailure logs a step that failed; step says which.
func (w *Worker) logFailure(step, id string, err error) {
	if w.Log != nil {
		w.Log.Warn("delivery step failed", slog.String("step", step), slog.String("ticket_id", id), slog.Any("error", err))
	}
}

// noteOutcome logs what delivering id came to and reports whether a step
// was recorded: a recorded failed or unknown state is warned of, a ticket
// another worker holds or took over passes quietly, any other error is
// logged.
func (w *Worker) noteOutcome(id string, u Update, err error) bool {
	switch {
	case err == nil:
		if u.State == StateFailed || u.State == StateUnknown {
			w.warnFinal(id, u)
		}
		return true
	case errors.Is(err, ErrNotClaimable), errors.Is(err, ErrLeaseLost):
	default:
		w.logFailure("deliver", id, err)
	}
	return false
}

// warnFinal logs a ticket whose recorded update u is failed or unknown: a
// person has to look at it (the operator's command lists them).
func (w *Worker) warnFinal(id string, u Update) {
	if w.Log != nil {
		w.Log.Warn("delivery: ticket needs a person", "ticket_id", id, "delivery_state", string(u.State), "error", u.Error)
	}
}
