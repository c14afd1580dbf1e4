package idem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
	"unicode/utf8"
)

// Call identifies one call of an operation.
type Call struct {
	// Tenant is the key space: the same request in two tenants is two
	// operations. Take it from the caller's authenticated identity, never
	// from the call's arguments.
	Tenant string
	// Owner is who, inside the tenant, may receive the stored result; a
	// repeat by another owner is a Conflict.
	Owner string
	// RequestID is the application-minted key of the request: the same
	// for every retry of one request, new for each new request. A call
	// without one is Invalid, never silently not idempotent.
	RequestID string
	// Function is the operation's stable name ("create_order"): part of
	// the key, so choose it once and keep it through refactors. It is
	// never derived from a Go identifier.
	Function string
	// Arguments is a JSON object; its RFC 8785 form goes into the key. A
	// call with no arguments sends {}: nil or empty is Invalid.
	Arguments []byte
}

// OpKey is a call's operation key.
type OpKey struct {
	ID          string // lower-case hex SHA-256 (see Key)
	AltID       string // the key the same call has under the other policy (Policy.Other); see Record.AltKey
	Fingerprint string // SHA-256 hex of Canonical
	Canonical   string // RFC 8785 text of the arguments
}

// KeyOf derives c's operation key under policy. The error wraps
// ErrInvalid.
func KeyOf(policy Policy, c Call) (OpKey, error) {
	switch {
	case c.Tenant == "" || c.Owner == "" || c.Function == "":
		return OpKey{}, invalid("a call needs a tenant, an owner and a function name")
	case c.RequestID == "":
		return OpKey{}, invalid("the call carries no request id, so it cannot be made safe to repeat")
	case !utf8.ValidString(c.Tenant) || !utf8.ValidString(c.Owner) || !utf8.ValidString(c.RequestID) || !utf8.ValidString(c.Function):
		return OpKey{}, invalid("tenant, owner, request id and function must be valid UTF-8")
	}
	canonical, err := Canonical(c.Arguments)
	if err != nil {
		return OpKey{}, err
	}
	id, fp := Key(policy, c.Tenant, c.RequestID, c.Function, canonical)
	alt := keyOnly(policy.Other(), c.Tenant, c.RequestID, c.Function, canonical)
	return OpKey{ID: id, AltID: alt, Fingerprint: fp, Canonical: canonical}, nil
}

// Plan builds, for a call whose key is free, the result to store and the
// caller's own writes to commit with the claim. It must be pure: a plan of
// the writes, not their effect. It runs before the store is written,
// whether or not the key turns out to be held, and must not act outside
// the writes it returns (send nothing, charge nothing). An error ends the
// call as Failed with nothing written.
//
// The result must not be empty; every repeat receives it byte for byte.
// A store may limit what it can keep (dynamostore's package doc says
// DynamoDB's limits); a result or writes the store cannot take end the
// call as Failed with nothing written.
type Plan[W any] func(c Claim) (result []byte, writes W, err error)

// Claim is what a plan is given: the call's key, and the time of the
// claim, which the record is stamped with (its CreatedAt, and ExpiresAt
// from it) and the plan's items should carry too.
type Claim struct {
	Key OpKey
	At  time.Time
}

// Guard makes calls of any operation idempotent over a Store. Check it
// once at start: a misconfigured Guard fails there. Do checks it again on
// every call and answers a misconfigured one with Invalid or Failed,
// never a panic.
type Guard[W any] struct {
	// Store commits the claims; a Guard without one answers Failed.
	Store Store[W]
	// Policy is PolicyArguments or PolicyRequest; empty means
	// PolicyArguments. Any other value makes every call Invalid.
	Policy Policy
	// Retention is how long a record holds its key (its expires_at), at
	// least a second: expiry is kept in whole seconds. After it the key is
	// free: a repeat runs the plan and commits its writes again. Make it
	// outlast the longest time a client may retry, and derive the ids of
	// the plan's items from OpKey.ID with a write that requires them to
	// be new, so that a later repeat is Refused rather than duplicated
	// (see the package doc).
	Retention time.Duration
	// Now is the clock records are stamped and judged by, and the one the
	// Cache and the Wait read (time.Now when nil).
	Now func() time.Time
	// Cache, when set, keeps completed records in process (see Cache): a
	// repeat it holds is answered without a store call. Nil: every call
	// asks the store.
	Cache *Cache
	// Wait, when Wait.Max is set, retries a claim answered InProgress
	// until the pending record completes or Wait.Max has passed (see
	// WaitPolicy). Zero: InProgress is answered at once.
	Wait WaitPolicy
}

// Check reports what makes g unfit to run calls: a Policy that is neither
// of the two, a Retention under a second, no Store, a Cache that holds no
// entry or serves a Guard over another store, a WaitPolicy with a negative duration. Call it once at start; Do
// answers every call of a Guard that fails it with Invalid (the Policy)
// or Failed (the rest).
func (g *Guard[W]) Check() error {
	if _, err := ParsePolicy(string(g.Policy)); err != nil {
		return fmt.Errorf("idem: Guard.Policy: %w", err)
	}
	return g.check()
}

// check is Check without the Policy, which Do parses itself.
func (g *Guard[W]) check() error {
	switch {
	case g.Retention < time.Second:
		return errors.New("idem: Guard.Retention must be at least a second")
	case g.Store == nil:
		return errors.New("idem: Guard.Store is nil")
	case g.Cache != nil && g.Cache.max < 1:
		return errors.New("idem: Guard.Cache holds no entry: make it with NewCache(n), n > 0")
	case g.Cache != nil && !g.Cache.serves(g, g.Store):
		return errors.New("idem: Guard.Cache serves a Guard over another store: give each store's Guard its own Cache")
	case g.Wait.Max < 0 || g.Wait.Initial < 0:
		return errors.New("idem: Guard.Wait: Max and Initial must not be negative")
	}
	return nil
}

// Outcome is what became of a call.
type Outcome struct {
	Status Status // what became of the call; the package doc says what to do next
	// Key is the operation key, once derived; when a record answered the
	// call, that record's key, which is the call's key under the other
	// policy when the record was claimed before a policy switch.
	Key string
	// Result is the result written (Created) or the stored result byte
	// for byte (Replayed); nil otherwise.
	Result []byte
	// RetryAfter is, for InProgress from a Guard with a Wait, how long
	// to wait before trying again: the pause the wait would have taken
	// next. Zero otherwise.
	RetryAfter time.Duration
	// Err says why, for Busy, Refused, Invalid and Failed, and for
	// InProgress when the call's context ended the wait.
	Err error
}

// Do runs c once: it derives the key, asks plan for the result and the
// writes, and claims the key with them in one transaction. A repeat of a
// completed call returns the stored result without committing plan's
// writes again; one the Cache holds is answered without running plan or
// calling the store, its owner and arguments checked as on every path.
func (g *Guard[W]) Do(ctx context.Context, c Call, plan Plan[W]) Outcome {
	policy, err := ParsePolicy(string(g.Policy))
	if err != nil {
		// A mistyped policy must not fall back to PolicyArguments: that
		// would turn off the Mismatch check the caller asked for.
		return Outcome{Status: Invalid, Err: fmt.Errorf("idem: Guard.Policy: %w", err)}
	}
	k, err := KeyOf(policy, c)
	if err != nil {
		return Outcome{Status: Invalid, Err: err}
	}
	if err := g.check(); err != nil {
		return Outcome{Status: Failed, Key: k.ID, Err: err}
	}
	if plan == nil {
		return Outcome{Status: Failed, Key: k.ID, Err: errors.New("idem: the plan is nil")}
	}
	now := g.now()
	call := Record{Key: k.ID, AltKey: k.AltID, Tenant: c.Tenant, Owner: c.Owner, Function: c.Function, Fingerprint: k.Fingerprint}
	if held, ok := g.Cache.lookup(call, now); ok {
		return judge(policy, call, &held, nil)
	}
	result, writes, err := plan(Claim{Key: k, At: now})
	switch {
	case err != nil:
		return Outcome{Status: Failed, Key: k.ID, Err: err}
	case len(result) == 0:
		return Outcome{Status: Failed, Key: k.ID, Err: errors.New("idem: the plan returned an empty result")}
	}
	w := g.Wait.start(now)
	for {
		rec := call
		rec.State, rec.Result = StateCompleted, result
		rec.CreatedAt, rec.ExpiresAt = now, now.Add(g.Retention).Truncate(time.Second)
		held, err := g.Store.Claim(ctx, rec, writes, now)
		o := judge(policy, rec, held, err)
		switch o.Status {
		case Created:
			g.Cache.put(rec, now)
			return o
		case Replayed:
			g.Cache.put(*held, now)
			return o
		case InProgress:
			if w == nil {
				return o
			}
			if !w.next(ctx, g.now, &o) {
				return o
			}
			now = g.now()
		default:
			return o
		}
	}
}

func (g *Guard[W]) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// judge turns a Store.Claim's answer for rec into an Outcome. The record
// held is checked by verdict, and must carry rec's key or, when rec has
// one, its AltKey; the outcome then carries the held record's key.
func judge(policy Policy, rec Record, held *Record, err error) Outcome {
	var refused *RefusedError
	switch {
	case errors.Is(err, ErrBusy):
		return Outcome{Status: Busy, Key: rec.Key, Err: err}
	case errors.As(err, &refused):
		return Outcome{Status: Refused, Key: rec.Key, Err: err}
	case errors.Is(err, ErrInvalid):
		return Outcome{Status: Invalid, Key: rec.Key, Err: err}
	case err != nil:
		return Outcome{Status: Failed, Key: rec.Key, Err: err}
	case held == nil:
		return Outcome{Status: Created, Key: rec.Key, Result: rec.Result}
	case held.Key != rec.Key && (rec.AltKey == "" || held.Key != rec.AltKey):
		return Outcome{Status: Failed, Key: rec.Key, Err: fmt.Errorf("idem: the store answered for key %q, not %q", held.Key, rec.Key)}
	case held.Key != rec.Key && (held.Tenant != rec.Tenant || held.Fingerprint != rec.Fingerprint):
		// A record under the other key holds the call only with its
		// tenant and arguments; a store that answers with another is
		// wrong, and replaying it would hand out another call's result.
		return Outcome{Status: Failed, Key: rec.Key, Err: fmt.Errorf("idem: the store answered with record %q of another tenant or other arguments", held.Key)}
	}
	switch s := verdict(held, policy, rec.Tenant, rec.Owner, rec.Fingerprint); s {
	case Replayed:
		return Outcome{Status: Replayed, Key: held.Key, Result: held.Result}
	case Failed:
		return Outcome{Status: Failed, Key: held.Key, Err: fmt.Errorf("idem: record %s is %q without a result", held.Key, held.State)}
	default:
		return Outcome{Status: s, Key: held.Key}
	}
}

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
