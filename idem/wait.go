package idem

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// defaultWaitInitial is WaitPolicy's first pause when Initial is zero.
const defaultWaitInitial = 100 * time.Millisecond

// WaitPolicy bounds the wait on a pending record. A pending record comes
// from a writer of the same store that claims keys before it knows their
// result (Store.Claim with StatePending); a Guard with a Wait, answered
// InProgress, claims again after a pause until the record completes
// (Replayed), expires (Created), another answer comes, or Max has passed
// by the Guard's clock. The pauses start at Initial and double, each
// drawn at random between half and all of its step (jitter), and none
// goes past Max (by the Guard's clock, and by the sum of the pauses, so
// that the wait ends even on a clock that does not move). When Max has passed the answer is InProgress with
// Outcome.RetryAfter, the pause the wait would have taken next. When the
// call's context ends during the wait, the answer is InProgress too, with
// the context's error in Outcome.Err: every claim made was answered by
// the pending record, so nothing was written.
//
// The zero WaitPolicy does not wait.
type WaitPolicy struct {
	// Max bounds the whole wait, from the first claim; zero: no wait.
	Max time.Duration
	// Initial is the first pause's step (100 ms when zero).
	Initial time.Duration
	// Sleep pauses for d, or until ctx ends with ctx's error (a timer
	// when nil). A test gives one that moves its Guard's clock instead.
	Sleep func(ctx context.Context, d time.Duration) error
}

// waiting is one call's wait: its deadline and next step.
type waiting struct {
	policy   WaitPolicy
	deadline time.Time
	step     time.Duration
	slept    time.Duration // the pauses so far: bounds the wait even on a clock that does not move
}

// start begins a wait at now, or returns nil for a policy that does not
// wait.
func (p WaitPolicy) start(now time.Time) *waiting {
	if p.Max <= 0 {
		return nil
	}
	step := p.Initial
	if step <= 0 {
		step = defaultWaitInitial
	}
	return &waiting{policy: p, deadline: now.Add(p.Max), step: min(step, p.Max)}
}

// next pauses before the next claim and reports whether to make it. When
// not, it has set o's RetryAfter, and its Err if ctx ended the wait.
func (w *waiting) next(ctx context.Context, now func() time.Time, o *Outcome) bool {
	left := min(w.deadline.Sub(now()), w.policy.Max-w.slept)
	if left <= 0 {
		o.RetryAfter = w.step
		return false
	}
	pause := min(w.step/2+rand.N(w.step/2+1), left) //nolint:gosec // jitter spreads retries; it needs no unpredictability
	if err := w.sleep(ctx, pause); err != nil {
		o.RetryAfter = w.step
		o.Err = fmt.Errorf("idem: the wait on the pending record ended: %w", err)
		return false
	}
	w.slept += pause
	w.step = min(2*w.step, w.policy.Max)
	return true
}

func (w *waiting) sleep(ctx context.Context, d time.Duration) error {
	if w.policy.Sleep != nil {
		return w.policy.Sleep(ctx, d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
