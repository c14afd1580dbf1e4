package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"
)

// Defaults of the Engine.
const (
	DefaultMaxAttempts = 8
	// DefaultLease covers a lookup and a send at the destinations' default
	// 10 s timeout each, plus a margin, and stays well under a minute.
	DefaultLease       = 25 * time.Second
	DefaultBackoffBase = 2 * time.Second
	DefaultBackoffMax  = 5 * time.Minute
	// leaseMargin is kept free at the lease's end: the calls made under a
	// lease are cut off this long before it runs out, so the result is
	// recorded while the lease still holds.
	leaseMargin = 3 * time.Second
)

// MaxLease bounds the lease LeaseFor sizes: well under a minute, so a
// ticket abandoned by a killed worker is taken over within a minute.
const MaxLease = 45 * time.Second

// LeaseFor sizes the lease for a destination whose calls time out after
// timeout: a lookup plus a send, plus the margin, at most MaxLease (a
// longer timeout is then cut short by the lease).
func LeaseFor(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return DefaultLease
	}
	return min(2*timeout+leaseMargin, MaxLease)
}

// Engine drives one ticket at a time through the delivery state machine:
// claim under a lease, look up first when an earlier send may have created
// the ticket, send, record. It is the same for every runner (the local
// worker, the stream and the scheduled sweep in Lambda).
type Engine struct {
	Store       Store
	Destination Destination
	// MaxAttempts bounds sends per ticket (DefaultMaxAttempts when zero).
	MaxAttempts int
	// Lease is how long a claim holds a ticket (DefaultLease when zero).
	Lease time.Duration
	// BackoffBase and BackoffMax shape the retry delay: base·2^(n-1) after
	// the n-th send, capped, with jitter over its upper half, and never
	// shorter than a Retry-After the destination asked for (itself capped
	// at MaxRetryAfter).
	BackoffBase, BackoffMax time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Jitter returns a value in [0, n) (math/rand/v2 when nil).
	Jitter func(n int64) int64
	// NewOwner returns a fresh lease owner token (random when nil).
	NewOwner func() string
	// Observer, when set, is told how each recorded step ended (the
	// delivery metrics and the Lambda's log line).
	Observer Observer
}

func (e *Engine) maxAttempts() int {
	if e.MaxAttempts > 0 {
		return e.MaxAttempts
	}
	return DefaultMaxAttempts
}

func (e *Engine) lease() time.Duration {
	if e.Lease > 0 {
		return e.Lease
	}
	return DefaultLease
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Engine) owner() string {
	if e.NewOwner != nil {
		return e.NewOwner()
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// backoff returns the delay after the n-th send, honouring retryAfter.
func (e *Engine) backoff(n int, retryAfter time.Duration) time.Duration {
	base, ceiling := e.BackoffBase, e.BackoffMax
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if ceiling <= 0 {
		ceiling = DefaultBackoffMax
	}
	d := base << min(max(n-1, 0), 20)
	if d > ceiling || d <= 0 {
		d = ceiling
	}
	half := int64(d / 2)
	jitter := e.Jitter
	if jitter == nil {
		jitter = mrand.Int64N //nolint:gosec // jitter spreads retries; it needs no unpredictability
	}
	if half > 0 {
		d = time.Duration(half + jitter(half+1))
	}
	return max(d, min(retryAfter, MaxRetryAfter))
}

// MaxRetryAfter caps the Retry-After the engine honours: a helpdesk that
// asks for a longer wait (or sends a nonsensical one) is retried after this
// long, so a ticket is never parked out of sight for days.
const MaxRetryAfter = time.Hour

// Deliver moves ticket id on by one step: it claims the ticket, delivers
// it or decides it cannot yet, and records the outcome. It returns the
// state recorded. ErrNotClaimable (not due, held by another worker, final,
// or no delivery record) and ErrLeaseLost (another worker took over while
// this one was sending) are not failures of the ticket: someone else has
// it. A claimed ticket that cannot be read is recorded failed.
func (e *Engine) Deliver(ctx context.Context, id string) (State, error) {
	u, err := e.deliver(ctx, id)
	return u.State, err
}

// deliver is Deliver returning the whole update recorded.
func (e *Engine) deliver(ctx context.Context, id string) (Update, error) {
	owner := e.owner()
	now := e.now()
	leaseUntil := CeilSecond(now.Add(e.lease()))
	c, err := e.Store.Claim(ctx, id, owner, now, leaseUntil)
	var u Update
	switch {
	case errors.Is(err, ErrUnreadable):
		u = unreadable(c, err)
	case err != nil:
		return Update{}, err
	default:
		u = e.step(ctx, c, leaseUntil)
	}
	if err := e.Store.Record(ctx, id, owner, u); err != nil {
		return Update{}, err
	}
	if e.Observer != nil {
		c.Ticket.ID = id
		e.Observer.StepEnded(ctx, stepOf(c.Ticket, u))
	}
	return u, nil
}

// unreadable ends a claimed ticket that cannot be read: it can never be
// sent, so retrying it would only repeat the error. Failed, with the
// cause; unknown instead if an earlier send may have created it.
func unreadable(c Claimed, err error) Update {
	u := kept(c.Before, StateFailed, err.Error())
	if u.SentUnknown {
		u.State = StateUnknown
	}
	return u
}

// kept is an update to state st that keeps the counts of r, with error msg.
func kept(r Record, st State, msg string) Update {
	return Update{State: st, Attempts: r.Attempts, LookupFailures: r.LookupFailures, SentUnknown: r.SentUnknown, Error: msg}
}

// stepOf describes the recorded update u of ticket t for an Observer.
func stepOf(t Ticket, u Update) Step {
	s := Step{TicketID: t.ID, Update: u, Result: resultOf(u.State)}
	if s.Result == ResultDelivered && !t.CreatedAt.IsZero() {
		s.Lag = max(u.DeliveredAt.Sub(t.CreatedAt), 0)
	}
	return s
}

// margin is the time kept free at the lease's end: leaseMargin, or half
// the lease when the lease is shorter than twice that (tests).
func (e *Engine) margin() time.Duration {
	return min(leaseMargin, e.lease()/2)
}

// callsContext bounds the calls made under the lease: they end at
// deadline (on the engine's clock), however long the claim took. With an
// injected clock, the time left on it is carried over to the real clock
// the context runs on.
func (e *Engine) callsContext(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if e.Now == nil {
		return context.WithDeadline(ctx, deadline)
	}
	return context.WithTimeout(ctx, deadline.Sub(e.now()))
}

// carried is the update a step starts from: the record before the claim,
// with a lapsed lease counted as a send.
func carried(c Claimed) Update {
	u := kept(c.Before, StatePending, c.Before.Error)
	if c.Before.State == StateDelivering {
		// The previous worker's lease ran out: it may have sent, and its
		// send's outcome is unknown. Count it, and look up before resending.
		u.Attempts++
		u.SentUnknown = true
		u.Error = "lease ran out while a worker held the ticket"
	}
	return u
}

// step decides what becomes of a ticket claimed until leaseUntil. It makes
// at most one lookup and one send, each cut off the margin before the
// lease ends; when the claim itself took so long that this point has
// passed, it calls nothing and releases the ticket, due at once, without
// counting a send.
func (e *Engine) step(ctx context.Context, c Claimed, leaseUntil time.Time) Update {
	u := carried(c)
	deadline := leaseUntil.Add(-e.margin())
	if now := e.now(); !now.Before(deadline) {
		u.DueAt = CeilSecond(now)
		return u
	}
	ctx, cancel := e.callsContext(ctx, deadline)
	defer cancel()
	limit := e.maxAttempts()

	lookupFailed := false
	if u.SentUnknown {
		r, found, err := e.lookup(ctx, c.Ticket.ID, &u)
		if found {
			return e.delivered(u, r)
		}
		if err != nil {
			lookupFailed = true
			u.Error = "lookup: " + err.Error()
		}
	}
	if u.Attempts >= limit || (lookupFailed && u.LookupFailures >= limit) {
		return e.exhausted(u)
	}
	if lookupFailed {
		return e.release(u, 0)
	}

	u.Attempts++
	r, err := e.Destination.Send(ctx, c.Ticket)
	if err == nil {
		return e.delivered(u, r)
	}
	var se *SendError
	if !errors.As(err, &se) {
		se = &SendError{Outcome: Unknown, Err: err}
	}
	u.Error = se.Error()
	switch se.Outcome {
	case Refused:
		u.State, u.DueAt = StateFailed, time.Time{}
		return u
	case NotCreated:
	default: // Unknown, or an outcome the engine does not know
		u.SentUnknown = true
	}
	if u.Attempts >= limit {
		if u.SentUnknown {
			return e.finalLookup(ctx, c.Ticket.ID, u)
		}
		return e.exhausted(u)
	}
	return e.release(u, se.RetryAfter)
}

// lookup asks the destination whether an earlier send created ticket id,
// and notes on u what it learnt: absent clears SentUnknown, a failure
// counts in LookupFailures and is returned. A destination that cannot look
// up (ErrNoLookup) leaves SentUnknown set: a resend carries the same key.
func (e *Engine) lookup(ctx context.Context, id string, u *Update) (r Receipt, found bool, err error) {
	r, found, err = e.Destination.Lookup(ctx, id)
	switch {
	case err == nil:
		if !found {
			u.SentUnknown = false // ruled out: no earlier send created it
		}
		return r, found, nil
	case errors.Is(err, ErrNoLookup):
		return r, false, nil
	}
	u.LookupFailures++
	return r, false, err
}

// finalLookup runs when the attempts ran out after a send whose outcome is
// unknown: found is delivered, absent is failed, anything else unknown.
func (e *Engine) finalLookup(ctx context.Context, id string, u Update) Update {
	r, found, err := e.lookup(ctx, id, &u)
	if found {
		return e.delivered(u, r)
	}
	if err != nil {
		u.Error += "; final lookup: " + err.Error()
	}
	return e.exhausted(u)
}

// exhausted ends a ticket whose attempts ran out: failed when no send can
// have created it, else unknown, for a person to decide.
func (e *Engine) exhausted(u Update) Update {
	u.DueAt = time.Time{}
	if u.SentUnknown {
		u.State = StateUnknown
		u.Error = fmt.Sprintf("attempts ran out (%d sends) and a send may have created the ticket: %s", u.Attempts, u.Error)
		return u
	}
	u.State = StateFailed
	u.Error = fmt.Sprintf("attempts ran out (%d sends): %s", u.Attempts, u.Error)
	return u
}

func (e *Engine) release(u Update, retryAfter time.Duration) Update {
	u.State = StatePending
	u.DueAt = CeilSecond(e.now().Add(e.backoff(max(u.Attempts, 1), retryAfter)))
	return u
}

func (e *Engine) delivered(u Update, r Receipt) Update {
	u.State = StateDelivered
	u.DueAt = time.Time{}
	u.SentUnknown = false
	u.Error = ""
	u.ExternalID, u.ExternalURL = r.ExternalID, r.ExternalURL
	u.DeliveredAt = e.now()
	return u
}
