package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/aivax-examples/idempotent-callback/idem"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// Defaults of the Engine.
const (
	DefaultMaxAttempts = 8
	// DefaultLease covers a lookup and a send at the destinations' default
	// 10 s timeout each, plus a margin, and stays well under a minute.
	DefaultLease       = 25 * time.Second
	DefaultBackoffBase = 2 * time.Second
	DefaultBackoffMax  = 5 * time.Minute
	// DefaultCallTimeout is the destinations' default client timeout.
	DefaultCallTimeout = 10 * time.Second
	// leaseMargin is kept free at the lease's end: the calls made under a
	// lease are cut off this long before it runs out, so the result is
	// recorded while the lease still holds.
	leaseMargin = 3 * time.Second
)

// MaxLease bounds the lease LeaseFor sizes: well under a minute, so a
// ticket abandoned by a killed worker is taken over within a minute.
const MaxLease = 45 * time.Second

// MinOutcomeMargin is the least margin of an outcome window: a helpdesk
// may still commit a create, or its lookup index may still lag, this long
// after the client gave up on it.
const MinOutcomeMargin = 5 * time.Second

// OutcomeWindow is how long after a send's start the helpdesk may still
// create the ticket it carried: the client timeout, then a margin of the
// timeout again and at least MinOutcomeMargin. A lookup that answers absent
// rules the send out only when it is made once the window has closed;
// before that, absent means not yet known. A zero timeout is
// DefaultCallTimeout.
func OutcomeWindow(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	return timeout + max(timeout, MinOutcomeMargin)
}

// MaxPause caps how long delivery to a destination pauses after it
// refused our credentials or URL, and so how late a ticket held back by
// that pause comes due.
const MaxPause = time.Hour

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
	Store       Outbox
	Destination Destination
	// MaxAttempts bounds sends per ticket (DefaultMaxAttempts when zero).
	MaxAttempts int
	// Lease is how long a claim holds a ticket (DefaultLease when zero).
	Lease time.Duration
	// BackoffBase and BackoffMax shape the retry delay: base·2^(n-1) after
	// the n-th send (or the n-th failed lookup), capped, with jitter over
	// its upper half, and never shorter than a Retry-After the destination
	// asked for (itself capped at MaxRetryAfter). After a send whose
	// outcome is unknown the ticket is not due before that send's outcome
	// window has closed. A pause after a refusal of our credentials grows
	// the same way from base, capped at MaxPause.
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
	// CallTimeout is the destination's client timeout (DefaultCallTimeout
	// when zero); it sizes the outcome window of a send.
	CallTimeout time.Duration
	// MaxLookups bounds the failed lookups per ticket (MaxAttempts when
	// zero): a ticket whose lookups keep failing ends unknown.
	MaxLookups int
	// Log, when set, is told once when the destination starts refusing
	// our credentials or URL, and once when it accepts them again.
	Log *slog.Logger

	health health // guarded by healthMu
}

// health is what an Engine knows of its destination's acceptance of our
// credentials and URL. After a Misconfigured answer delivery pauses until
// until; each further refusal doubles the pause, up to MaxPause; any call
// the destination accepts ends it.
//
// Lookups are tracked apart: a refused lookup counts against its ticket
// and pauses nothing, lookupsRefused only keeps its log line to one per
// change, and only a lookup the destination answers ends it (a working
// send says nothing of the token's right to read).
type health struct {
	// streak counts the refusals since the destination last accepted a
	// send: above zero, the last send that told anything was a refusal.
	streak int
	until  time.Time // calls wait until then
	reason string    // the refusal, for the held tickets' error

	lookupsRefused bool // the last lookup that told anything was a refusal
}

// healthMu guards every Engine's health. One lock for all engines keeps
// Engine free of locks, so it can be copied before use as a value; its
// sections are a few assignments long.
var healthMu sync.Mutex

func (e *Engine) maxAttempts() int {
	if e.MaxAttempts > 0 {
		return e.MaxAttempts
	}
	return DefaultMaxAttempts
}

func (e *Engine) maxLookups() int {
	if e.MaxLookups > 0 {
		return e.MaxLookups
	}
	return e.maxAttempts()
}

// windowEnd is when the outcome window of a send started at sentAt closes.
func (e *Engine) windowEnd(sentAt time.Time) time.Time {
	return sentAt.Add(OutcomeWindow(e.CallTimeout))
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

// backoff returns the delay after the n-th failed send (or the n-th failed
// lookup), honouring retryAfter.
func (e *Engine) backoff(n int, retryAfter time.Duration) time.Duration {
	ceiling := e.BackoffMax
	if ceiling <= 0 {
		ceiling = DefaultBackoffMax
	}
	return max(e.jittered(n, ceiling), min(retryAfter, MaxRetryAfter))
}

// jittered is BackoffBase·2^(n-1), capped at ceiling, with jitter over its
// upper half.
func (e *Engine) jittered(n int, ceiling time.Duration) time.Duration {
	base := e.BackoffBase
	if base <= 0 {
		base = DefaultBackoffBase
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
	return d
}

// MaxRetryAfter caps the Retry-After the engine honours: a helpdesk that
// asks for a longer wait (or sends a nonsensical one) is retried after this
// long, so a ticket is never parked out of sight for days.
const MaxRetryAfter = time.Hour

// Deliver moves the record id (a ticket, or an effect: see OutboxID) on
// by one step: it claims it, delivers it or decides it cannot yet, and
// records the outcome. It returns the state recorded. ErrNotClaimable
// (not due, held by another worker, final, or no delivery record) and
// ErrLeaseLost (another worker took over while this one was sending) are
// not failures of the record: someone else has it. A claimed record that
// cannot be read is recorded failed (unknown if an earlier send may have
// created it).
//
// An effect that follows a ticket waits, released pending without an
// attempt counted, until the ticket is delivered and the record before it
// in the ticket's order is final (Sequencer); it fails when the ticket's
// delivery failed. Once a record is final, Deliver moves on to the one
// after it, which may have been waiting for it, while the context leaves
// time for a lease: a follow-up goes out within moments of its
// predecessor, on every runner, instead of at the next sweep.
func (e *Engine) Deliver(ctx context.Context, id string) (State, error) {
	u, err := e.deliverOn(ctx, id)
	return u.State, err
}

// deliverOn is Deliver returning the whole update recorded on id.
func (e *Engine) deliverOn(ctx context.Context, id string) (Update, error) {
	first, next, err := e.deliver(ctx, id)
	if err != nil {
		return Update{}, err
	}
	seq, _ := e.Store.(Sequencer)
	for hops := 0; next != "" && seq != nil && hops < maxChain && e.timeForStep(ctx); hops++ {
		if err := seq.Wake(ctx, next, e.now()); err != nil {
			e.logMoveOn(next, err)
			break
		}
		if _, next, err = e.deliver(ctx, next); err != nil {
			if !errors.Is(err, ErrNotClaimable) && !errors.Is(err, ErrLeaseLost) {
				e.logMoveOn(next, err)
			}
			break
		}
	}
	return first, nil
}

// maxChain bounds the records one Deliver moves on to: a ticket and every
// follow-up it can hold.
const maxChain = 128

// timeForStep reports whether ctx leaves a lease's time for another step.
func (e *Engine) timeForStep(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > e.lease()
}

// logMoveOn logs a record the engine could not move on to; the sweep
// will.
func (e *Engine) logMoveOn(id string, err error) {
	if e.Log != nil {
		e.Log.Warn("delivery could not move on to the next record; the sweep will", slog.String("id", id), slog.String("error", err.Error()))
	}
}

// deliver is Deliver's one step, under the record's span (tracing.go):
// the update recorded, and the record to move on to ("" for none).
func (e *Engine) deliver(ctx context.Context, id string) (u Update, next string, err error) {
	ctx, span := startTicketSpan(ctx, id)
	defer func() { endTicketSpan(span, u, err) }()
	return e.deliverStep(ctx, id)
}

// deliverStep is deliver's step, under the record's span in ctx.
func (e *Engine) deliverStep(ctx context.Context, id string) (Update, string, error) {
	owner := e.owner()
	now := e.now()
	leaseUntil := CeilSecond(now.Add(e.lease()))
	c, err := e.Store.Claim(ctx, id, owner, now, leaseUntil)
	linkClaimed(ctx, c)
	var u Update
	var g gated
	held := false
	switch {
	case errors.Is(err, ErrUnreadable):
		u = unreadable(c, now, err)
	case err != nil:
		return Update{}, "", err
	case c.Effect != nil:
		if g, err = e.gate(ctx, id, c); err != nil {
			u = e.release(carried(c, now), now.Add(e.backoff(1, 0)))
			u.Error = "order: " + err.Error()
			break
		}
		switch {
		case g.wait:
			// Not carried(): a lapsed lease of a record that must wait
			// was no send, since what it waits for is not final now and
			// so was not then either; waiting counts no attempt.
			u = kept(c.Before, StatePending, "waiting for "+g.before)
			u.DueAt = CeilSecond(now.Add(g.recheck))
		case g.fail != "":
			u = carried(c, now)
			u.State, u.DueAt, u.Error = StateFailed, time.Time{}, g.fail
			if u.SentUnknown {
				u.State = StateUnknown
			}
		default:
			u, held = e.step(ctx, c, leaseUntil, e.effectCalls(g.effect))
		}
	default:
		u, held = e.step(ctx, c, leaseUntil, e.ticketCalls(c.Ticket))
	}
	if err := e.settle(ctx, id, owner, u); err != nil {
		return Update{}, "", err
	}
	if e.Observer != nil {
		c.Ticket.ID = id
		s := stepOf(c.Ticket, u)
		s.Kind = kindOf(c)
		switch {
		case held:
			s.Result = ResultMisconfigured
		case g.wait:
			s.Result = ResultWaiting
		}
		e.Observer.StepEnded(ctx, s)
	}
	return u, e.next(ctx, id, u, g), nil
}

// settle records u under a span of its own.
func (e *Engine) settle(ctx context.Context, id, owner string, u Update) error {
	ctx, span := tracing.Tracer().Start(ctx, tracing.SpanSettle, trace.WithAttributes(tracing.AttrState.String(string(u.State))))
	defer span.End()
	// A follow-up's transaction writes the ticket's item too, and a write
	// that meets it is refused busy (DynamoDB's TransactionConflict): try
	// again shortly, while the lease leaves time, rather than leave a
	// delivered record to its lease's end.
	var err error
	for try := 0; ; try++ {
		err = e.Store.Record(ctx, id, owner, u)
		if err == nil || !errors.Is(err, idem.ErrBusy) || try == settleRetries || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(25*(try+1))*time.Millisecond + time.Duration(e.jitterN(25))*time.Millisecond)
	}
	if err != nil {
		span.SetStatus(codes.Error, "not recorded")
	}
	return err
}

// settleRetries is how many times a record refused busy is written again.
const settleRetries = 3

// jitterN is a value in [0, n) from the engine's Jitter.
func (e *Engine) jitterN(n int64) int64 {
	if e.Jitter != nil {
		return e.Jitter(n)
	}
	return mrand.Int64N(n) //nolint:gosec // jitter spreads retries; it needs no unpredictability
}

// kindOf is the kind of the claimed record.
func kindOf(c Claimed) string {
	if c.Effect != nil {
		return c.Effect.Kind
	}
	return KindTicket
}

// WaitRecheck is how long an effect that waits for its predecessors stays
// pending when nobody wakes it: the worker that settles a predecessor
// wakes it at once (Sequencer.Wake); this is the sweep's fallback.
const WaitRecheck = 30 * time.Second

// WaitForPerson is how long an effect stays pending behind a record that
// ended unknown: only a person moves that on, and resolving it wakes the
// record after it (ResolveDelivered, ResolveFailed).
const WaitForPerson = 15 * time.Minute

// gated is what the order of a ticket's records says of a claimed effect.
type gated struct {
	effect  Effect        // with the ticket's helpdesk id, when it may go
	wait    bool          // a predecessor is not settled yet
	before  string        // the record it waits for
	recheck time.Duration // how long it waits before it looks again
	after   string        // the record after it, read with its neighbours
	read    bool          // after was read
	fail    string        // the ticket's delivery failed: why
}

// gate decides whether the claimed effect may be sent: its ticket must be
// delivered (failed fails it; pending, delivering or unknown hold it) and
// the record before it final (delivered or failed; unknown holds it until
// a person resolves it). An effect that follows no ticket goes at once.
func (e *Engine) gate(ctx context.Context, id string, c Claimed) (gated, error) {
	g := gated{effect: *c.Effect}
	if _, ok := e.Store.(Sequencer); g.effect.TicketID == "" || !ok {
		return g, nil
	}
	// One read of the ticket's record gives its state and the order of
	// what follows it (Record.FollowUps, from the same item).
	ticket := g.effect.TicketID
	t, err := e.Store.Delivery(ctx, ticket)
	switch {
	case errors.Is(err, ErrNoRecord):
		g.fail = "ticket not delivered: it has no delivery record"
		return g, nil
	case err != nil:
		return g, err
	}
	before, after := Neighbours(ticket, t.FollowUps, id)
	g.after, g.read = after, true
	g.effect.TicketExternalID = t.ExternalID
	switch t.State {
	case StateDelivered:
	case StateFailed:
		g.fail = "ticket not delivered: " + t.Error
		return g, nil
	default:
		g.wait, g.before, g.recheck = true, ticket, recheckBehind(t.State)
		return g, nil
	}
	// The record before it must be final. One that failed lets it go only
	// if the records before that one are final too: a record recorded
	// failed without its own turn (unreadable) says nothing of them.
	for p := before; p != "" && p != ticket; {
		r, err := e.Store.Delivery(ctx, p)
		switch {
		case errors.Is(err, ErrNoRecord):
			return g, nil
		case err != nil:
			return g, err
		case r.State == StateDelivered:
			return g, nil
		case r.State != StateFailed:
			g.wait, g.before, g.recheck = true, p, recheckBehind(r.State)
			return g, nil
		}
		p, _ = Neighbours(ticket, t.FollowUps, p)
	}
	return g, nil
}

// recheckBehind is how long an effect waits behind a record in state st
// before it looks again, if nobody wakes it.
func recheckBehind(st State) time.Duration {
	if st == StateUnknown {
		return WaitForPerson
	}
	return WaitRecheck
}

// next is the record to move on to once id's step recorded u: the one
// after it when u is final and lets it go (delivered or failed), read
// after the record was settled unless the gate already saw one (a
// follow-up committed during the send, which found this record not yet
// final and waits, is seen then), itself again when it waited for a
// predecessor that has settled since (its worker may have found this one
// held and left it), else none.
func (e *Engine) next(ctx context.Context, id string, u Update, g gated) string {
	seq, ok := e.Store.(Sequencer)
	if !ok {
		return ""
	}
	if g.wait {
		p, err := e.Store.Delivery(ctx, g.before)
		if err == nil && (p.State == StateDelivered || p.State == StateFailed) {
			return id
		}
		return ""
	}
	if u.State != StateDelivered && u.State != StateFailed {
		return ""
	}
	if g.read && g.after != "" {
		return g.after // the list only grows: what came after it still does
	}
	_, _, after, err := seq.Neighbours(ctx, id)
	if err != nil {
		e.logMoveOn(id, err)
		return ""
	}
	return after
}

// calls are the destination's calls for one claimed record: its lookup
// and its send (the n-th), and whether its creates are keyed by the
// delivery key (KeyedCreator).
type calls struct {
	lookup func(ctx context.Context) (Receipt, bool, error)
	send   func(ctx context.Context) (Receipt, error)
	keyed  bool
}

func (e *Engine) ticketCalls(t HelpdeskTicket) calls {
	return calls{
		lookup: func(ctx context.Context) (Receipt, bool, error) { return e.Destination.Lookup(ctx, t.ID) },
		send:   func(ctx context.Context) (Receipt, error) { return e.Destination.Send(ctx, t) },
		keyed:  keyedByID(e.Destination),
	}
}

// effectCalls are ef's calls; a destination that takes no effects refuses
// every send and cannot be queried.
func (e *Engine) effectCalls(ef Effect) calls {
	es, ok := e.Destination.(EffectSender)
	if !ok {
		return calls{
			lookup: func(context.Context) (Receipt, bool, error) { return Receipt{}, false, ErrNoLookup },
			send: func(context.Context) (Receipt, error) {
				return Receipt{}, &SendError{Failure: Refused, Err: fmt.Errorf("the destination takes no %s effects", ef.Kind)}
			},
		}
	}
	return calls{
		lookup: func(ctx context.Context) (Receipt, bool, error) { return es.LookupEffect(ctx, ef) },
		send:   func(ctx context.Context) (Receipt, error) { return es.SendEffect(ctx, ef) },
		keyed:  keyedByID(e.Destination),
	}
}

// unreadable ends a claimed ticket that cannot be read at now: it can
// never be sent, so retrying it would only repeat the error. Failed, with
// the cause; unknown instead if an earlier send may have created it,
// including a send made under a lease that ran out.
func unreadable(c Claimed, now time.Time, err error) Update {
	u := carried(c, now)
	u.State, u.Error = StateFailed, err.Error()
	if u.SentUnknown {
		u.State = StateUnknown
	}
	return u
}

// kept is an update to state st that keeps the counts of r and what it
// knows of earlier sends, with error msg.
func kept(r Record, st State, msg string) Update {
	return Update{State: st, Attempts: r.Attempts, LookupFailures: r.LookupFailures,
		SentUnknown: r.SentUnknown, SentAt: r.SentAt, Error: msg}
}

// stepOf describes the recorded update u of ticket t for an Observer.
func stepOf(t HelpdeskTicket, u Update) Step {
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

// carried is the update a step claimed at now starts from: the record
// before the claim, with a lapsed lease counted as a send. A record with
// SentUnknown and no SentAt (a send that may have created the ticket, at
// an unknown time) has its window counted from now, so no lookup rules
// that send out before a whole window has passed.
func carried(c Claimed, now time.Time) Update {
	u := kept(c.Before, StatePending, c.Before.Error)
	if u.SentUnknown && u.SentAt.IsZero() {
		u.SentAt = ceilMilli(now)
	}
	if c.Before.State == StateDelivering {
		// The previous worker's lease ran out: it may have sent, and its
		// send's outcome is unknown. Count it, and look up before
		// resending. Its send started before its lease ended: the lease's
		// end is the latest start, so the window counted from it covers
		// the send.
		u.Attempts++
		u.SentUnknown = true
		u.SentAt = c.Before.LeaseUntil
		u.Error = "lease ran out while a worker held the ticket"
	}
	return u
}

// step decides what becomes of a ticket claimed until leaseUntil, and
// reports whether it was held back because the destination refused our
// credentials or URL. It makes at most one lookup and one send, each cut
// off the margin before the lease ends; when the claim itself took so long
// that this point has passed, it calls nothing and releases the ticket,
// due at once, without counting a send. While delivery to the destination
// is paused it calls nothing either, and releases the ticket until the
// pause ends.
func (e *Engine) step(ctx context.Context, c Claimed, leaseUntil time.Time, call calls) (Update, bool) {
	now := e.now()
	u := carried(c, now)
	deadline := leaseUntil.Add(-e.margin())
	if !now.Before(deadline) {
		u.DueAt = CeilSecond(now)
		return u, false
	}
	if until, reason, paused := e.paused(now); paused {
		u.DueAt = CeilSecond(until)
		u.Error = heldError + reason
		return u, true
	}
	ctx, cancel := e.callsContext(ctx, deadline)
	defer cancel()

	if u.SentUnknown {
		lookedAt := e.now()
		r, found, err := call.lookup(ctx)
		if err == nil {
			e.lookupAnswered()
		}
		switch {
		case err == nil && found:
			return e.delivered(u, r), false
		case err == nil || errors.Is(err, ErrNoLookup):
			// Absent, or the destination cannot be queried. Neither rules
			// out a send whose window has not closed: the helpdesk may
			// still be committing it, or its index may lag, and a resend
			// with the same key (deduplicated once the earlier send has
			// committed) could meet a receiver that does not answer 409
			// meanwhile and create the ticket twice. So after an ordinary
			// unknown send, a takeover after a lapsed lease or a person's
			// resend alike, look (or send) again once the window has
			// closed; no send is made or counted.
			//
			// A destination whose creates are keyed by the delivery key
			// (KeyedCreator) needs no window before a resend: a late
			// commit of the earlier send and the resend are one record,
			// so absent lets the resend go at once. The earlier send is
			// not ruled out by it, though: only a lookup past the window
			// rules it out, so that a create still committing (or a
			// lookup that lagged) never lets the ticket end failed while
			// the helpdesk holds it.
			end := e.windowEnd(u.SentAt)
			if lookedAt.Before(end) {
				if !call.keyed || err != nil {
					u.DueAt = CeilSecond(end)
					return u, false
				}
			} else if err == nil {
				u.SentUnknown, u.SentAt = false, time.Time{} // ruled out
			}
		default:
			// A failed lookup of this ticket counts against it, so it
			// ends delivered or unknown, never pending for ever. A refused
			// one (401 or 403: a token that may create but not list, say)
			// is reported held; sends are not paused, so tickets that need
			// no lookup still go.
			var se *SendError
			held := errors.As(err, &se) && se.Failure == Misconfigured
			var retryAfter time.Duration
			if se != nil {
				retryAfter = se.RetryAfter
			}
			u.Error = "lookup: " + err.Error()
			if held {
				e.lookupRefused(se)
				u.Error = "lookup refused: " + err.Error()
			}
			u.LookupFailures++
			if u.LookupFailures >= e.maxLookups() {
				return e.exhausted(u, false), false
			}
			return e.release(u, e.now().Add(e.backoff(u.LookupFailures, retryAfter))), held
		}
	}
	if u.Attempts >= e.maxAttempts() {
		return e.exhausted(u, true), false
	}

	sentAt := e.now()
	u.Attempts++
	r, err := call.send(sendContext(ctx, u.Attempts))
	if err == nil {
		e.accepted()
		return e.delivered(u, r), false
	}
	var se *SendError
	if !errors.As(err, &se) {
		se = &SendError{Failure: Unknown, Err: err}
	}
	switch se.Failure {
	case Misconfigured:
		// A refused credential or URL created nothing: not a send.
		u.Attempts--
		return e.hold(u, se), true
	case Refused:
		e.accepted()
		u.DueAt = time.Time{}
		if u.SentUnknown {
			// This send is refused, but an earlier one may have created
			// the ticket: a person decides.
			u.State = StateUnknown
			u.Error = "refused after an earlier send that may have created the ticket: " + se.Error()
			return u, false
		}
		u.State, u.Error = StateFailed, se.Error()
		return u, false
	case NotCreated:
	default: // Unknown, or an outcome the engine does not know
		u.SentUnknown = true
		u.SentAt = ceilMilli(sentAt)
	}
	u.Error = se.Error()
	now = e.now()
	if u.Attempts >= e.maxAttempts() {
		if u.SentUnknown {
			// The last send may have created it: look it up once its
			// window has closed, and end then.
			return e.release(u, later(now, e.windowEnd(u.SentAt))), false
		}
		return e.exhausted(u, true), false
	}
	due := now.Add(e.backoff(u.Attempts, se.RetryAfter))
	if u.SentUnknown && !call.keyed {
		// No resend (and no lookup that could rule a send out) before
		// the window of the last unknown send has closed. A destination
		// whose creates are keyed by the delivery key is looked up after
		// the backoff alone, and resent at once if absent.
		due = later(due, e.windowEnd(u.SentAt))
	}
	return e.release(u, due), false
}

// heldError prefixes the error of a ticket held back because the
// destination refused our credentials or URL.
const heldError = "held: the destination refused our credentials or URL: "

// hold releases a ticket whose call the destination answered
// Misconfigured: delivery to the destination pauses, and the ticket is due
// when the pause ends, with nothing counted against it.
func (e *Engine) hold(u Update, se *SendError) Update {
	until := e.refused(se)
	u.State = StatePending
	u.DueAt = CeilSecond(until)
	u.Error = heldError + se.Error()
	return u
}

// paused reports whether delivery to the destination is paused at now,
// until when, and why.
func (e *Engine) paused(now time.Time) (time.Time, string, bool) {
	healthMu.Lock()
	defer healthMu.Unlock()
	h := e.health
	return h.until, h.reason, h.streak > 0 && now.Before(h.until)
}

// refused notes that the destination refused our credentials or URL and
// returns when delivery to it resumes. A refusal met while already paused
// (a call started before the pause) does not lengthen it. The first
// refusal after the destination was healthy is logged.
func (e *Engine) refused(se *SendError) time.Time {
	now := e.now()
	healthMu.Lock()
	h := &e.health
	first := h.streak == 0
	if first || !now.Before(h.until) {
		h.streak++
		d := max(e.jittered(h.streak, MaxPause), min(se.RetryAfter, MaxPause))
		h.until, h.reason = now.Add(d), se.Error()
	}
	until := h.until
	healthMu.Unlock()
	if first && e.Log != nil {
		e.Log.Error("delivery destination refused our credentials or URL", slog.String("call", "send"),
			slog.Int("status", se.Status), slog.String("error", se.Error()), slog.Time("paused_until", until))
	}
	return until
}

// lookupRefused notes that the destination refused a lookup (401 or 403).
// The first refusal after a lookup it answered is logged, with what the
// token needs.
func (e *Engine) lookupRefused(se *SendError) {
	healthMu.Lock()
	first := !e.health.lookupsRefused
	e.health.lookupsRefused = true
	healthMu.Unlock()
	if first && e.Log != nil {
		e.Log.Error("delivery destination refused our credentials or URL", slog.String("call", "lookup"),
			slog.Int("status", se.Status), slog.String("error", se.Error()),
			slog.String("effect", "tickets whose send may have created them cannot be looked up and end unknown once their lookups run out; the token must be allowed to list tickets by external_id"))
	}
}

// lookupAnswered notes a lookup the destination answered (found or
// absent): a refusal of lookups ends.
func (e *Engine) lookupAnswered() {
	healthMu.Lock()
	was := e.health.lookupsRefused
	e.health.lookupsRefused = false
	healthMu.Unlock()
	if was && e.Log != nil {
		e.Log.Info("delivery destination answers our lookups again")
	}
}

// accepted notes a send the destination accepted (it created the ticket
// or refused it on its merits): any pause of sends ends. A lookup does not
// end a pause: a token that may read but not create would otherwise end
// every pause at the next lookup, and its refusals would be logged each
// time. Nor does a send end a refusal of lookups, for the same reason the
// other way round.
func (e *Engine) accepted() {
	healthMu.Lock()
	was := e.health.streak > 0
	e.health = health{lookupsRefused: e.health.lookupsRefused}
	healthMu.Unlock()
	if was && e.Log != nil {
		e.Log.Info("delivery destination accepts our credentials again")
	}
}

// exhausted ends a ticket whose sends (or, when !sends, lookups) ran out:
// failed when no send can have created it, else unknown, for a person to
// decide.
func (e *Engine) exhausted(u Update, sends bool) Update {
	u.DueAt = time.Time{}
	what := fmt.Sprintf("sends ran out (%d sends, %d failed lookups)", u.Attempts, u.LookupFailures)
	if !sends {
		what = fmt.Sprintf("lookups ran out (%d failed lookups, %d sends)", u.LookupFailures, u.Attempts)
	}
	if u.SentUnknown {
		u.State = StateUnknown
		u.Error = what + " and a send may have created the ticket: " + u.Error
		return u
	}
	u.State = StateFailed
	u.Error = what + ": " + u.Error
	return u
}

// release puts the ticket back to pending, due at due (rounded up).
func (e *Engine) release(u Update, due time.Time) Update {
	u.State = StatePending
	u.DueAt = CeilSecond(due)
	return u
}

func (e *Engine) delivered(u Update, r Receipt) Update {
	u.State = StateDelivered
	u.DueAt = time.Time{}
	u.SentUnknown, u.SentAt = false, time.Time{}
	u.Error = ""
	u.ExternalID, u.ExternalURL = r.ExternalID, r.ExternalURL
	u.DeliveredAt = e.now()
	return u
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ceilMilli rounds t up to a whole millisecond, the precision the stores
// keep a send's start in: rounded up, the window never closes early.
func ceilMilli(t time.Time) time.Time {
	if tr := t.Truncate(time.Millisecond); !tr.Equal(t) {
		return tr.Add(time.Millisecond)
	}
	return t
}
