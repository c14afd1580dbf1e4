package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// DefaultPoll is how often a Worker looks for due tickets when nothing
// wakes it.
const DefaultPoll = 500 * time.Millisecond

// Worker runs the Engine in-process, for the local server: woken by Notify
// after each commit, polling for due tickets at least every Poll, and at
// start picking up whatever a previous process left pending or delivering
// (a delivering ticket once its lease has run out).
type Worker struct {
	Engine *Engine
	// Poll is the longest wait between two sweeps (DefaultPoll when zero;
	// keep it at most a second, so a ticket is picked up within a second
	// of its due time).
	Poll time.Duration
	// Batch bounds the tickets taken per sweep (64 when zero).
	Batch int
	// Concurrency bounds the tickets delivered at once (4 when zero).
	Concurrency int
	// Log receives one line per failed step; never credentials.
	Log *slog.Logger

	once sync.Once
	wake chan struct{}
}

func (w *Worker) init() { w.once.Do(func() { w.wake = make(chan struct{}, 1) }) }

// Notify wakes the worker for a sweep; it never blocks.
func (w *Worker) Notify() {
	w.init()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run sweeps until ctx ends, then waits for the deliveries in flight and
// returns ctx's error.
func (w *Worker) Run(ctx context.Context) error {
	w.init()
	poll := w.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	timer := time.NewTimer(0) // the first sweep resumes what was left
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.wake:
		case <-timer.C:
		}
		w.Sweep(ctx)
		timer.Reset(poll)
	}
}

// Sweep delivers the tickets due now, up to Batch of them, and returns how
// many it moved on.
func (w *Worker) Sweep(ctx context.Context) int {
	batch, conc := w.Batch, w.Concurrency
	if batch <= 0 {
		batch = 64
	}
	if conc <= 0 {
		conc = 4
	}
	ids, err := w.Engine.Store.Due(ctx, w.Engine.now(), batch)
	if err != nil {
		w.log("delivery: finding due tickets", "", err)
		return 0
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		moved int
	)
	sem := make(chan struct{}, conc)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := w.Engine.Deliver(ctx, id)
			switch {
			case err == nil:
				mu.Lock()
				moved++
				mu.Unlock()
			case errors.Is(err, ErrNotClaimable), errors.Is(err, ErrLeaseLost):
			default:
				w.log("delivery: ticket step failed", id, err)
			}
		})
	}
	wg.Wait()
	return moved
}

func (w *Worker) log(msg, id string, err error) {
	if w.Log != nil {
		w.Log.Warn(msg, "ticket_id", id, "error", err.Error())
	}
}
