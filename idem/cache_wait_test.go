package idem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// counting counts the claims that reach the store it wraps.
type counting struct {
	idem.Store[memstore.Writes]
	mu     sync.Mutex
	claims int
}

func (c *counting) Claim(ctx context.Context, rec idem.Record, w memstore.Writes, now time.Time) (*idem.Record, error) {
	c.mu.Lock()
	c.claims++
	c.mu.Unlock()
	return c.Store.Claim(ctx, rec, w, now)
}

func (c *counting) Claims() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claims
}

func orderCall(owner, requestID, args string) idem.Call {
	return idem.Call{Tenant: "shop-1", Owner: owner, RequestID: requestID, Function: "create_order", Arguments: []byte(args)}
}

// planned counts the plans run and returns a result naming the n-th.
type planned struct{ n int }

func (p *planned) plan(idem.Claim) ([]byte, memstore.Writes, error) {
	p.n++
	return fmt.Appendf(nil, `{"order":%d}`, p.n), nil, nil
}

func wantOutcome(t *testing.T, o idem.Outcome, s idem.Status, result string) {
	t.Helper()
	if o.Status != s || string(o.Result) != result {
		t.Fatalf("outcome %v %s (%v), want %v %s", o.Status, o.Result, o.Err, s, result)
	}
}

// Check names what makes a Guard unfit, once; a fit one passes.
func TestGuardCheck(t *testing.T) {
	store := memstore.New()
	for _, tc := range []struct {
		name  string
		guard idem.Guard[memstore.Writes]
		err   string // "" for none
	}{
		{"fit", idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Cache: idem.NewCache(8), Wait: idem.WaitPolicy{Max: time.Second}}, ""},
		{"request policy", idem.Guard[memstore.Writes]{Store: store, Policy: idem.PolicyRequest, Retention: time.Second}, ""},
		{"a mistyped policy", idem.Guard[memstore.Writes]{Store: store, Policy: "args", Retention: time.Hour}, `Guard.Policy: key policy "args"`},
		{"no retention", idem.Guard[memstore.Writes]{Store: store}, "Guard.Retention must be at least a second"},
		{"a retention under a second", idem.Guard[memstore.Writes]{Store: store, Retention: 999 * time.Millisecond}, "Guard.Retention must be at least a second"},
		{"no store", idem.Guard[memstore.Writes]{Retention: time.Hour}, "Guard.Store is nil"},
		{"a cache of no entry", idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Cache: idem.NewCache(0)}, "Guard.Cache holds no entry"},
		{"a zero cache", idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Cache: &idem.Cache{}}, "Guard.Cache holds no entry"},
		{"a negative wait", idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Wait: idem.WaitPolicy{Max: -time.Second}}, "Guard.Wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.guard.Check()
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Check = %v, want an error saying %q", err, tc.err)
			}
			// Do answers the same Guard without running the plan.
			p := &planned{}
			if o := tc.guard.Do(context.Background(), orderCall("c-7", "r1", `{}`), p.plan); o.Status != idem.Invalid && o.Status != idem.Failed || p.n != 0 {
				t.Fatalf("Do = %v (%v) after %d plans, want invalid or failed before any", o.Status, o.Err, p.n)
			}
		})
	}
}

// Record.Check refuses each record that cannot hold its key, with an
// error wrapping ErrInvalid, and passes one that can.
func TestRecordCheck(t *testing.T) {
	now := time.Now().UTC()
	valid := idem.Record{Key: "k", State: idem.StateCompleted, Result: []byte(`{}`), ExpiresAt: now.Add(time.Second)}
	pending := idem.Record{Key: "k", State: idem.StatePending, ExpiresAt: now.Add(time.Nanosecond)}
	for _, r := range []idem.Record{valid, pending} {
		if err := r.Check(now); err != nil {
			t.Fatalf("Check(%+v) = %v, want nil", r, err)
		}
	}
	for name, change := range map[string]func(*idem.Record){
		"no key":                     func(r *idem.Record) { r.Key = "" },
		"no state":                   func(r *idem.Record) { r.State = "" },
		"an unknown state":           func(r *idem.Record) { r.State = "Completed" },
		"completed without a result": func(r *idem.Record) { r.Result = nil },
		"no expiry":                  func(r *idem.Record) { r.ExpiresAt = time.Time{} },
		"expiring now":               func(r *idem.Record) { r.ExpiresAt = now },
		"expired":                    func(r *idem.Record) { r.ExpiresAt = now.Add(-time.Nanosecond) },
	} {
		r := valid
		change(&r)
		if err := r.Check(now); !errors.Is(err, idem.ErrInvalid) {
			t.Errorf("%s: Check = %v, want an error wrapping ErrInvalid", name, err)
		}
	}
}

// answering is a store that answers every claim with err.
type answering struct{ err error }

func (a answering) Claim(context.Context, idem.Record, memstore.Writes, time.Time) (*idem.Record, error) {
	return nil, a.err
}

// A store's error is judged by what it wraps: ErrBusy → Busy, a
// RefusedError → Refused (whatever the caller's error wraps), ErrInvalid
// → Invalid, anything else → Failed.
func TestStoreErrorsAreJudgedByWhatTheyWrap(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want idem.Status
	}{
		{fmt.Errorf("%w: throttled", idem.ErrBusy), idem.Busy},
		{&idem.RefusedError{Index: -1, Err: fmt.Errorf("the caller's: %w", idem.ErrInvalid)}, idem.Refused},
		{fmt.Errorf("%w: the record has no key", idem.ErrInvalid), idem.Invalid},
		{errors.New("disk full"), idem.Failed},
	} {
		g := &idem.Guard[memstore.Writes]{Store: answering{tc.err}, Retention: time.Hour}
		o := g.Do(context.Background(), orderCall("c-7", "r1", `{}`), (&planned{}).plan)
		if o.Status != tc.want || !errors.Is(o.Err, tc.err) || o.Result != nil {
			t.Errorf("%v: %v (%v), want %v carrying the store's error", tc.err, o.Status, o.Err, tc.want)
		}
	}
}

// With a Cache, a repeat of a completed call costs no store call and
// runs no plan, and gets the stored result byte for byte; a caller that
// changes the bytes it got changes nothing in the cache.
func TestCacheRepeatCostsNoStoreCall(t *testing.T) {
	store := &counting{Store: memstore.New()}
	g := &idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Cache: idem.NewCache(16)}
	p := &planned{}
	c := orderCall("c-7", "r1", `{"sku":"A-1"}`)
	wantOutcome(t, g.Do(context.Background(), c, p.plan), idem.Created, `{"order":1}`)
	for range 3 {
		o := g.Do(context.Background(), c, p.plan)
		wantOutcome(t, o, idem.Replayed, `{"order":1}`)
		o.Result[0] = 'X'
	}
	if store.Claims() != 1 || p.n != 1 {
		t.Fatalf("%d claims and %d plans for a call and 3 repeats, want 1 and 1", store.Claims(), p.n)
	}
	// Without a cache every repeat is a claim.
	g.Cache = nil
	wantOutcome(t, g.Do(context.Background(), c, p.plan), idem.Replayed, `{"order":1}`)
	if store.Claims() != 2 {
		t.Fatalf("%d claims, want 2", store.Claims())
	}
}

// A record the store replayed is cached too: a second Guard over the
// same store, whose cache is cold, claims once and then answers from its
// cache.
func TestCacheKeepsReplayedRecords(t *testing.T) {
	mem := memstore.New()
	p := &planned{}
	c := orderCall("c-7", "r1", `{}`)
	first := &idem.Guard[memstore.Writes]{Store: mem, Retention: time.Hour}
	wantOutcome(t, first.Do(context.Background(), c, p.plan), idem.Created, `{"order":1}`)
	store := &counting{Store: mem}
	warm := &idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Cache: idem.NewCache(16)}
	for range 3 {
		wantOutcome(t, warm.Do(context.Background(), c, p.plan), idem.Replayed, `{"order":1}`)
	}
	if store.Claims() != 1 {
		t.Fatalf("%d claims, want 1", store.Claims())
	}
}

// A cached record is judged on every hit: another owner is a Conflict,
// disclosing nothing and not reaching the store; the owner's original
// call still replays. Other arguments under PolicyRequest are a Mismatch
// without disclosing the result, but the store answers it: the call's
// own operation may be held under its key of the other policy, which
// answers first (TestCacheFindsTheOperationUnderEitherPolicysKey).
func TestCacheStillJudges(t *testing.T) {
	store := &counting{Store: memstore.New()}
	g := &idem.Guard[memstore.Writes]{Store: store, Policy: idem.PolicyRequest, Retention: time.Hour, Cache: idem.NewCache(16)}
	p := &planned{}
	wantOutcome(t, g.Do(context.Background(), orderCall("c-7", "r1", `{"qty":1}`), p.plan), idem.Created, `{"order":1}`)
	wantOutcome(t, g.Do(context.Background(), orderCall("c-8", "r1", `{"qty":1}`), p.plan), idem.Conflict, "")
	if store.Claims() != 1 || p.n != 1 {
		t.Fatalf("another owner: %d claims and %d plans, want 1 and 1", store.Claims(), p.n)
	}
	wantOutcome(t, g.Do(context.Background(), orderCall("c-7", "r1", `{"qty":2}`), p.plan), idem.Mismatch, "")
	if store.Claims() != 2 {
		t.Fatalf("other arguments: %d claims, want 2 (the store answers them)", store.Claims())
	}
	wantOutcome(t, g.Do(context.Background(), orderCall("c-7", "r1", `{"qty":1}`), p.plan), idem.Replayed, `{"order":1}`)
	if store.Claims() != 2 {
		t.Fatalf("%d claims, want 2", store.Claims())
	}
}

// The cache finds a call's operation as the store does after a change of
// Guard.Policy: under the call's key, or under its key of the other
// policy (OpKey.AltID) with the call's tenant and arguments. A record of
// other arguments under either key answers nothing from the cache: the
// store does, and it answers with the call's own operation when one
// holds the other key.
func TestCacheFindsTheOperationUnderEitherPolicysKey(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	p := &planned{}
	qty1, qty2 := orderCall("c-7", "r1", `{"qty":1}`), orderCall("c-7", "r1", `{"qty":2}`)
	before := &idem.Guard[memstore.Writes]{Store: mem, Policy: idem.PolicyArguments, Retention: time.Hour}
	wantOutcome(t, before.Do(ctx, qty1, p.plan), idem.Created, `{"order":1}`) // under its arguments key

	// After the switch: the store answers with the record under the other
	// key, which the cache keeps and then answers from.
	store := &counting{Store: mem}
	after := &idem.Guard[memstore.Writes]{Store: store, Policy: idem.PolicyRequest, Retention: time.Hour, Cache: idem.NewCache(16)}
	for i := range 3 {
		o := after.Do(ctx, qty1, p.plan)
		wantOutcome(t, o, idem.Replayed, `{"order":1}`)
		if k, _ := idem.KeyOf(idem.PolicyArguments, qty1); o.Key != k.ID {
			t.Fatalf("repeat %d replayed from key %s, want the arguments key %s", i, o.Key, k.ID)
		}
	}
	if store.Claims() != 1 {
		t.Fatalf("%d claims for a call and 2 repeats after the switch, want 1", store.Claims())
	}

	// The same request with other arguments is claimed under the request
	// key; the first arguments then meet a cached record of other
	// arguments under their own key, and their own operation, also
	// cached, under the other key: that one answers, with no claim.
	second := after.Do(ctx, qty2, p.plan)
	wantOutcome(t, second, idem.Created, fmt.Sprintf(`{"order":%d}`, p.n))
	claims := store.Claims()
	wantOutcome(t, after.Do(ctx, qty1, p.plan), idem.Replayed, `{"order":1}`)
	wantOutcome(t, after.Do(ctx, qty2, p.plan), idem.Replayed, string(second.Result))
	if store.Claims() != claims {
		t.Fatalf("%d claims for repeats both cached, want 0", store.Claims()-claims)
	}

	// A cold cache that holds only the record of other arguments under
	// the request key leaves the call to the store, which replays the
	// call's own operation instead of answering Mismatch.
	cold := &counting{Store: mem}
	fresh := &idem.Guard[memstore.Writes]{Store: cold, Policy: idem.PolicyRequest, Retention: time.Hour, Cache: idem.NewCache(16)}
	wantOutcome(t, fresh.Do(ctx, qty2, p.plan), idem.Replayed, string(second.Result))
	wantOutcome(t, fresh.Do(ctx, qty1, p.plan), idem.Replayed, `{"order":1}`)
	if cold.Claims() != 2 {
		t.Fatalf("%d claims, want 2 (the second past the cache)", cold.Claims())
	}

	// Back to PolicyArguments on a cache that holds the request key's
	// record of qty2: a call of other arguments is not answered by it.
	back := &idem.Guard[memstore.Writes]{Store: cold, Policy: idem.PolicyArguments, Retention: time.Hour, Cache: fresh.Cache}
	third := back.Do(ctx, orderCall("c-7", "r1", `{"qty":3}`), p.plan)
	wantOutcome(t, third, idem.Created, fmt.Sprintf(`{"order":%d}`, p.n))
	if cold.Claims() != 3 {
		t.Fatalf("%d claims, want 3 (other arguments reach the store)", cold.Claims())
	}
	// qty2's own operation is under the request key, cached: no claim.
	wantOutcome(t, back.Do(ctx, qty2, p.plan), idem.Replayed, string(second.Result))
	if cold.Claims() != 3 {
		t.Fatalf("%d claims, want 3 (qty2 answered from the cache under the other key)", cold.Claims())
	}
}

// A cached entry lives as long as its record, by the Guard's clock: to
// the record's last second it answers, after it the call goes to the
// store, which treats the expired record as absent.
func TestCacheEntryNeverOutlivesItsRecord(t *testing.T) {
	clk := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	store := &counting{Store: memstore.New()}
	g := &idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Now: clk.Now, Cache: idem.NewCache(16)}
	p := &planned{}
	c := orderCall("c-7", "r1", `{}`)
	wantOutcome(t, g.Do(context.Background(), c, p.plan), idem.Created, `{"order":1}`)
	clk.Advance(time.Hour) // the record's last second
	wantOutcome(t, g.Do(context.Background(), c, p.plan), idem.Replayed, `{"order":1}`)
	if store.Claims() != 1 {
		t.Fatalf("%d claims inside the retention, want 1", store.Claims())
	}
	clk.Advance(time.Second)
	wantOutcome(t, g.Do(context.Background(), c, p.plan), idem.Created, `{"order":2}`)
	if store.Claims() != 2 {
		t.Fatalf("%d claims after the record expired, want 2", store.Claims())
	}
}

// Only completed records are cached: a pending record answers
// InProgress on every call, each one a claim; a busy answer is not
// cached either.
func TestCacheKeepsOnlyCompletedRecords(t *testing.T) {
	clk := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	mem := memstore.New()
	store := &counting{Store: mem}
	g := &idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Now: clk.Now, Cache: idem.NewCache(16)}
	c := orderCall("c-7", "r-pending", `{}`)
	claimPending(t, mem, c, clk.Now())
	for range 2 {
		wantOutcome(t, g.Do(context.Background(), c, (&planned{}).plan), idem.InProgress, "")
	}
	if store.Claims() != 2 {
		t.Fatalf("%d claims for 2 calls on a pending record, want 2", store.Claims())
	}
	g.Store = answering{idem.ErrBusy}
	wantOutcome(t, g.Do(context.Background(), orderCall("c-7", "r-busy", `{}`), (&planned{}).plan), idem.Busy, "")
	g.Store = &counting{Store: memstore.New()}
	wantOutcome(t, g.Do(context.Background(), orderCall("c-7", "r-busy", `{}`), (&planned{}).plan), idem.Created, `{"order":1}`)
}

// The cache holds at most its size, dropping the least recently used.
func TestCacheIsBounded(t *testing.T) {
	store := &counting{Store: memstore.New()}
	g := &idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Cache: idem.NewCache(2)}
	p := &planned{}
	do := func(rid string) { g.Do(context.Background(), orderCall("c-7", rid, `{}`), p.plan) }
	do("a")
	do("b")
	do("a") // a is now the most recent
	do("c") // drops b
	before := store.Claims()
	do("a")
	do("c")
	if store.Claims() != before {
		t.Fatalf("repeats of the two most recent keys made %d claims, want 0", store.Claims()-before)
	}
	do("b")
	if store.Claims() != before+1 {
		t.Fatalf("the dropped key's repeat made %d claims, want 1", store.Claims()-before)
	}
}

func claimPending(t *testing.T, s idem.Store[memstore.Writes], c idem.Call, now time.Time) {
	t.Helper()
	k, err := idem.KeyOf(idem.PolicyArguments, c)
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Claim(context.Background(), idem.Record{Key: k.ID, State: idem.StatePending, Tenant: c.Tenant, Owner: c.Owner,
		Function: c.Function, Fingerprint: k.Fingerprint, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, nil, now)
	if err != nil || held != nil {
		t.Fatalf("pending claim: %v %v", held, err)
	}
}

// writer is another writer of the store: it holds a record of its own
// that it can complete, and answers every claim of that key with it
// while it lives; a claim of a free key is written.
type writer struct {
	mu     sync.Mutex
	held   map[string]idem.Record
	claims int
}

func (w *writer) Claim(_ context.Context, rec idem.Record, _ memstore.Writes, now time.Time) (*idem.Record, error) {
	if err := rec.Check(now); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.claims++
	if h, ok := w.held[rec.Key]; ok && h.Live(now) {
		return &h, nil
	}
	w.held[rec.Key] = rec
	return nil, nil
}

// pendingWriter is a writer holding a pending record of c, expiring at
// expires; complete completes it with result.
func pendingWriter(t *testing.T, c idem.Call, now, expires time.Time) (w *writer, complete func(result string)) {
	t.Helper()
	k, err := idem.KeyOf(idem.PolicyArguments, c)
	if err != nil {
		t.Fatal(err)
	}
	w = &writer{held: map[string]idem.Record{k.ID: {Key: k.ID, State: idem.StatePending, Tenant: c.Tenant, Owner: c.Owner,
		Function: c.Function, Fingerprint: k.Fingerprint, CreatedAt: now, ExpiresAt: expires}}}
	return w, func(result string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		r := w.held[k.ID]
		r.State, r.Result = idem.StateCompleted, []byte(result)
		w.held[k.ID] = r
	}
}

// sleeper is a WaitPolicy.Sleep that moves the clock instead of
// sleeping, counts the pauses and runs then after the n-th.
type sleeper struct {
	clk    *testenv.Clock
	pauses []time.Duration
	then   func(n int, ctx context.Context) error
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.pauses = append(s.pauses, d)
	if s.clk != nil {
		s.clk.Advance(d)
	}
	if s.then != nil {
		return s.then(len(s.pauses), ctx)
	}
	return nil
}

func (s *sleeper) total() (sum time.Duration) {
	for _, d := range s.pauses {
		sum += d
	}
	return sum
}

// A pending record the other writer completes during the wait is
// Replayed, its result byte for byte, and cached.
func TestWaitReplaysWhatAnotherWriterCompletes(t *testing.T) {
	clk := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	c := orderCall("c-7", "r1", `{}`)
	w, complete := pendingWriter(t, c, clk.Now(), clk.Now().Add(time.Hour))
	sl := &sleeper{clk: clk, then: func(n int, _ context.Context) error {
		if n == 2 {
			complete(`{"order":"theirs"}`)
		}
		return nil
	}}
	g := &idem.Guard[memstore.Writes]{Store: w, Retention: time.Hour, Now: clk.Now, Cache: idem.NewCache(4),
		Wait: idem.WaitPolicy{Max: 10 * time.Second, Initial: 100 * time.Millisecond, Sleep: sl.Sleep}}
	o := g.Do(context.Background(), c, (&planned{}).plan)
	wantOutcome(t, o, idem.Replayed, `{"order":"theirs"}`)
	if w.claims != 3 || len(sl.pauses) != 2 {
		t.Fatalf("%d claims and %d pauses, want 3 and 2", w.claims, len(sl.pauses))
	}
	// The pauses grow: the second's step is twice the first's, and each
	// is at least half its step.
	if sl.pauses[0] < 50*time.Millisecond || sl.pauses[0] > 100*time.Millisecond || sl.pauses[1] < 100*time.Millisecond || sl.pauses[1] > 200*time.Millisecond {
		t.Fatalf("pauses %v, want one in [50ms,100ms] then one in [100ms,200ms]", sl.pauses)
	}
	wantOutcome(t, g.Do(context.Background(), c, (&planned{}).plan), idem.Replayed, `{"order":"theirs"}`)
	if w.claims != 3 {
		t.Fatalf("the cached repeat made a claim: %d", w.claims)
	}
}

// A record that stays pending ends the wait at its bound, by the Guard's
// clock, as InProgress with how long to wait before the next try; a
// clock that does not move ends it too, by the sum of the pauses.
func TestWaitEndsInProgressAtItsBound(t *testing.T) {
	for _, moving := range []bool{true, false} {
		t.Run(map[bool]string{true: "moving clock", false: "still clock"}[moving], func(t *testing.T) {
			clk := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
			start := clk.Now()
			c := orderCall("c-7", "r1", `{}`)
			w, _ := pendingWriter(t, c, start, start.Add(time.Hour))
			sl := &sleeper{}
			if moving {
				sl.clk = clk
			}
			const bound = 5 * time.Second
			g := &idem.Guard[memstore.Writes]{Store: w, Retention: time.Hour, Now: clk.Now,
				Wait: idem.WaitPolicy{Max: bound, Initial: 100 * time.Millisecond, Sleep: sl.Sleep}}
			o := g.Do(context.Background(), c, (&planned{}).plan)
			wantOutcome(t, o, idem.InProgress, "")
			if o.RetryAfter <= 0 || o.RetryAfter > bound || o.Err != nil {
				t.Fatalf("RetryAfter %v, err %v; want a hint in (0, %v] and no error", o.RetryAfter, o.Err, bound)
			}
			if sl.total() != bound || w.claims != len(sl.pauses)+1 || len(sl.pauses) < 3 {
				t.Fatalf("paused %v in %d pauses for %d claims; want %v in all, one claim more than pauses, at least 3", sl.total(), len(sl.pauses), w.claims, bound)
			}
			if moving && clk.Now().Sub(start) != bound {
				t.Fatalf("the clock moved %v, want %v", clk.Now().Sub(start), bound)
			}
		})
	}
}

// A pending record that expires during the wait frees the key: the next
// claim takes it (Created).
func TestWaitClaimsAKeyWhosePendingRecordExpires(t *testing.T) {
	clk := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	c := orderCall("c-7", "r1", `{}`)
	w, _ := pendingWriter(t, c, clk.Now(), clk.Now().Add(time.Second))
	sl := &sleeper{clk: clk}
	g := &idem.Guard[memstore.Writes]{Store: w, Retention: time.Hour, Now: clk.Now,
		Wait: idem.WaitPolicy{Max: time.Minute, Initial: time.Second, Sleep: sl.Sleep}}
	wantOutcome(t, g.Do(context.Background(), c, (&planned{}).plan), idem.Created, `{"order":1}`)
}

// The call's context ending during the wait ends it at once: InProgress,
// with the context's error and the hint, and no claim after it.
func TestWaitEndsWithTheContext(t *testing.T) {
	clk := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	c := orderCall("c-7", "r1", `{}`)
	w, _ := pendingWriter(t, c, clk.Now(), clk.Now().Add(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sl := &sleeper{clk: clk, then: func(_ int, ctx context.Context) error {
		cancel()
		return ctx.Err()
	}}
	g := &idem.Guard[memstore.Writes]{Store: w, Retention: time.Hour, Now: clk.Now,
		Wait: idem.WaitPolicy{Max: time.Minute, Sleep: sl.Sleep}}
	o := g.Do(ctx, c, (&planned{}).plan)
	if o.Status != idem.InProgress || !errors.Is(o.Err, context.Canceled) || o.RetryAfter != 100*time.Millisecond {
		t.Fatalf("%v (%v) retry after %v, want in progress with context.Canceled, retry after %v", o.Status, o.Err, o.RetryAfter, 100*time.Millisecond)
	}
	if w.claims != 1 {
		t.Fatalf("%d claims, want 1", w.claims)
	}
}

// Without a Wait, InProgress is answered at once, with no hint; the
// default sleep ends with the context (no Sleep given: a real timer).
func TestNoWait(t *testing.T) {
	clk := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
	c := orderCall("c-7", "r1", `{}`)
	w, _ := pendingWriter(t, c, clk.Now(), clk.Now().Add(time.Hour))
	g := &idem.Guard[memstore.Writes]{Store: w, Retention: time.Hour, Now: clk.Now}
	o := g.Do(context.Background(), c, (&planned{}).plan)
	if o.Status != idem.InProgress || o.RetryAfter != 0 || w.claims != 1 {
		t.Fatalf("%v, retry after %v, %d claims; want in progress at once, no hint, 1 claim", o.Status, o.RetryAfter, w.claims)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.Wait = idem.WaitPolicy{Max: time.Hour, Initial: time.Hour}
	if o := g.Do(ctx, c, (&planned{}).plan); o.Status != idem.InProgress || !errors.Is(o.Err, context.Canceled) {
		t.Fatalf("%v (%v), want in progress ended by the context", o.Status, o.Err)
	}
}

// A Cache serves the Guards of one store: a Guard over another store
// given it fails Check and every call, before any claim; a Guard under
// another policy over the same store shares it.
func TestCacheRefusedAcrossStores(t *testing.T) {
	cache := idem.NewCache(16)
	first := &counting{Store: memstore.New()}
	g := &idem.Guard[memstore.Writes]{Store: first, Retention: time.Hour, Cache: cache}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	same := &idem.Guard[memstore.Writes]{Store: first, Policy: idem.PolicyRequest, Retention: time.Hour, Cache: cache}
	if err := same.Check(); err != nil {
		t.Fatalf("a Guard over the same store: %v", err)
	}
	other := &counting{Store: memstore.New()}
	h := &idem.Guard[memstore.Writes]{Store: other, Retention: time.Hour, Cache: cache}
	if err := h.Check(); err == nil || !strings.Contains(err.Error(), "another store") {
		t.Fatalf("a Guard over another store: %v; want refused", err)
	}
	o := h.Do(context.Background(), orderCall("c-7", "r1", `{}`), (&planned{}).plan)
	if o.Status != idem.Failed || other.Claims() != 0 {
		t.Fatalf("its call: %v after %d claims; want failed before any", o.Status, other.Claims())
	}
}
