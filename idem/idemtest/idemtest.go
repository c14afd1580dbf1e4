// Package idemtest is the conformance suite of idem.Store: it runs a store
// on its real backing storage through idem.Guard against the rules of
// package idem (created, replayed byte for byte, in progress never taken
// over, busy, conflict, mismatch, refused writes that claim nothing,
// expired-but-present treated as absent, a record that cannot hold its
// key refused as invalid with nothing written, a context that ends during
// the caller's writes answered busy, a repeat found under the other key
// policy's key), sequentially and under concurrency. A store's test calls
// Run with a Fixture.
package idemtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// Fixture is one store on fresh, empty storage, and the caller's writes
// the suite commits with its claims.
type Fixture[W any] struct {
	Store idem.Store[W]
	// Write returns writes that record the effect named id (a row, an
	// item). Writing the same id twice must fail: the store refuses it.
	Write func(id string) W
	// Refuse returns writes whose condition fails, so that the store
	// refuses them and writes nothing.
	Refuse func() W
	// Cancel returns writes for the effect named id during which the
	// claim's context ends: the store's run of them calls cancel, the
	// context's CancelFunc, and then fails as a writer that meets an ended
	// context does (on SQLite, the caller's function inside the
	// transaction; in memory, the caller's function; on DynamoDB, where
	// no code of the caller's runs, the fixture's client when the
	// transaction carries the effect's item). The claim must answer
	// idem.Busy, never idem.Refused. Nil skips that case.
	Cancel func(id string, cancel context.CancelFunc) W
	// Effects counts the effects stored.
	Effects func(t *testing.T) int
	// Reopen, when set, returns a store on the same storage, as after a
	// restart.
	Reopen func(t *testing.T) idem.Store[W]
}

// opener returns a Fixture on fresh storage. now is the suite's clock: a
// store that reads a clock of its own must read this one.
type opener[W any] = func(t *testing.T, now func() time.Time) Fixture[W]

// retention is the retention of the suite's records.
const retention = 24 * time.Hour

// shifts are the clocks the suite runs at: today, and a year on either
// side, so that no rule holds only on the day it was written.
var shifts = []struct {
	Name string
	By   time.Duration
}{{"today", 0}, {"a year ahead", 365 * 24 * time.Hour}, {"a year behind", -365 * 24 * time.Hour}}

// Run runs the suite at each of three clocks: today, and a year on either
// side. open returns a Fixture on fresh storage for each case; now is the
// suite's clock, which a store that reads a clock of its own must read.
func Run[W any](t *testing.T, open func(t *testing.T, now func() time.Time) Fixture[W]) {
	for _, sh := range shifts {
		t.Run(sh.Name, func(t *testing.T) {
			run(t, open, time.Now().UTC().Truncate(time.Second).Add(sh.By))
		})
	}
}

// harness is a Guard over one Fixture with a clock that moves only when
// the test moves it.
type harness[W any] struct {
	T       *testing.T     // the test the harness was made for
	F       Fixture[W]     // the store under test and its writes
	Guard   *idem.Guard[W] // over F.Store, on the harness's clock (Now)
	mu      sync.Mutex
	now     time.Time
	effects atomic.Int64
}

// newEnv opens a Fixture with the clock at start, under policy.
func newEnv[W any](t *testing.T, open opener[W], start time.Time, policy idem.Policy) *harness[W] {
	e := &harness[W]{T: t, now: start}
	e.F = open(t, e.Now)
	e.Guard = &idem.Guard[W]{Store: e.F.Store, Policy: policy, Retention: retention, Now: e.Now}
	return e
}

// Now reads the suite's clock.
func (e *harness[W]) Now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

// Advance moves the clock.
func (e *harness[W]) Advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

// call is a call of the suite's operation, create_order: owners alice and
// carol are in tenant-a, bob in tenant-b.
func call(owner, requestID, args string) idem.Call {
	tenant := "tenant-a"
	if owner == "bob" {
		tenant = "tenant-b"
	}
	return idem.Call{Tenant: tenant, Owner: owner, RequestID: requestID, Function: "create_order", Arguments: []byte(args)}
}

// Do runs c with a plan that writes a new effect and returns its id as
// the result.
func (e *harness[W]) Do(ctx context.Context, c idem.Call) idem.Outcome {
	return e.Guard.Do(ctx, c, func(idem.Claim) ([]byte, W, error) {
		id := fmt.Sprintf("effect-%d", e.effects.Add(1))
		return []byte(`{"order_id":"` + id + `"}`), e.F.Write(id), nil
	})
}

// Effects counts the stored effects.
func (e *harness[W]) Effects() int { return e.F.Effects(e.T) }

// want fails the test unless o has status s.
func want(t *testing.T, o idem.Outcome, s idem.Status) {
	t.Helper()
	if o.Status != s {
		t.Fatalf("status = %v (err %v), want %v", o.Status, o.Err, s)
	}
}

const order = `{"sku":"A-1","qty":2}`

func run[W any](t *testing.T, open opener[W], start time.Time) {
	ctx := context.Background()
	env := func(t *testing.T, policy idem.Policy) *harness[W] { return newEnv(t, open, start, policy) }
	effects := func(t *testing.T, e *harness[W], want int) {
		t.Helper()
		if n := e.Effects(); n != want {
			t.Fatalf("effects stored = %d, want %d", n, want)
		}
	}
	// race makes n calls at once, call(i) the i-th, and fails the test
	// unless their outcomes count as want (of n in all; wants says it) and
	// every replay carries the created result (tally), which it returns.
	race := func(t *testing.T, e *harness[W], n int, call func(i int) idem.Call, wantCounts map[idem.Status]int, wants string) ([]idem.Outcome, string) {
		t.Helper()
		outs := concurrent(n, func(i int) idem.Outcome { return e.Do(ctx, call(i)) })
		counts, created := tally(t, outs)
		if !maps.Equal(counts, wantCounts) {
			t.Fatalf("outcomes %v, want %s", counts, wants)
		}
		return outs, created
	}
	// replays fails the test, saying why, unless o replays first's result.
	replays := func(t *testing.T, o, first idem.Outcome, why string) {
		t.Helper()
		want(t, o, idem.Replayed)
		if string(o.Result) != string(first.Result) {
			t.Fatal(why)
		}
	}

	// keyed is a call of alice under PolicyArguments, its key, and its
	// record at e's now in state st with result, living an hour.
	keyed := func(t *testing.T, e *harness[W], requestID string, st idem.State, result []byte) (idem.Call, idem.Record, time.Time) {
		t.Helper()
		c := call("alice", requestID, order)
		k, err := idem.KeyOf(idem.PolicyArguments, c)
		must(t, err)
		now := e.Now()
		return c, idem.Record{Key: k.ID, State: st, Tenant: c.Tenant, Owner: c.Owner, Function: c.Function,
			Fingerprint: k.Fingerprint, Result: result, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, now
	}

	t.Run("created, then the repeat replays the stored result byte for byte", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		first := e.Do(ctx, call("alice", "r1", order))
		want(t, first, idem.Created)
		second := e.Do(ctx, call("alice", "r1", order))
		want(t, second, idem.Replayed)
		if string(second.Result) != string(first.Result) || second.Key != first.Key {
			t.Fatalf("replayed %s (key %s), want %s (key %s)", second.Result, second.Key, first.Result, first.Key)
		}
		effects(t, e, 1)
	})

	t.Run("member order and white space do not make a new operation", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		first := e.Do(ctx, call("alice", "r1", `{"sku":"A-1","qty":2}`))
		replays(t, e.Do(ctx, call("alice", "r1", `{ "qty" : 2, "sku":"A-1" }`)), first, "a variant of the same arguments got another result")
		effects(t, e, 1)
	})

	t.Run("policy arguments: changed arguments are a new operation", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		want(t, e.Do(ctx, call("alice", "r1", order)), idem.Created)
		want(t, e.Do(ctx, call("alice", "r1", `{"sku":"A-1","qty":3}`)), idem.Created)
		effects(t, e, 2)
	})

	t.Run("policy request: changed arguments are a mismatch, nothing written", func(t *testing.T) {
		e := env(t, idem.PolicyRequest)
		first := e.Do(ctx, call("alice", "r1", order))
		want(t, first, idem.Created)
		o := e.Do(ctx, call("alice", "r1", `{"sku":"A-1","qty":3}`))
		want(t, o, idem.Mismatch)
		if o.Result != nil {
			t.Fatalf("mismatch disclosed %s", o.Result)
		}
		replays(t, e.Do(ctx, call("alice", "r1", order)), first, "the original arguments no longer replay the first result")
		effects(t, e, 1)
	})

	for _, from := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
		t.Run(fmt.Sprintf("a switch of the policy from %s to %s: the repeat replays the operation, one effect", from, from.Other()), func(t *testing.T) {
			e := env(t, from)
			first := e.Do(ctx, call("alice", "r-switch", order))
			want(t, first, idem.Created)
			e.Guard.Policy = from.Other()
			for range 2 {
				again := e.Do(ctx, call("alice", "r-switch", `{ "qty":2, "sku":"A-1" }`))
				replays(t, again, first, "after the switch the repeat got another result")
				if again.Key != first.Key {
					t.Fatalf("replayed from key %s, want the operation's %s", again.Key, first.Key)
				}
			}
			want(t, e.Do(ctx, call("carol", "r-switch", order)), idem.Conflict) // the owner is still checked
			// The operation found answers before the caller's writes are
			// looked at: writes that would be refused do not hide it.
			refused := e.Guard.Do(ctx, call("alice", "r-switch", order), func(idem.Claim) ([]byte, W, error) {
				return []byte(`{"order_id":"never"}`), e.F.Refuse(), nil
			})
			replays(t, refused, first, "with writes that would be refused, the repeat got another result")
			e.Guard.Policy = from // and back
			replays(t, e.Do(ctx, call("alice", "r-switch", order)), first, "after switching back the repeat got another result")
			effects(t, e, 1)
		})
	}

	// A switch of policy between two calls of one request with other
	// arguments: the second is a new operation, each call then replays its
	// own operation (not the record of the other arguments under its
	// request key), and each case checks what else its switch implies.
	for _, sw := range []struct {
		name     string
		from, to idem.Policy
		then     func(t *testing.T, e *harness[W], first, other idem.Outcome)
	}{
		{"after a switch from request to arguments, the same request with other arguments is a new operation",
			idem.PolicyRequest, idem.PolicyArguments,
			func(t *testing.T, e *harness[W], first, other idem.Outcome) {
				if string(other.Result) == string(first.Result) {
					t.Fatalf("other arguments got the first operation's result %s", other.Result)
				}
			}},
		{"after a switch from arguments to request, an operation claimed before it still replays when its request was made since with other arguments",
			idem.PolicyArguments, idem.PolicyRequest,
			func(t *testing.T, e *harness[W], _, _ idem.Outcome) {
				want(t, e.Do(ctx, call("alice", "r-switch", `{"sku":"A-1","qty":4}`)), idem.Mismatch)
			}},
	} {
		t.Run(sw.name, func(t *testing.T) {
			e := env(t, sw.from)
			first := e.Do(ctx, call("alice", "r-switch", order))
			want(t, first, idem.Created)
			e.Guard.Policy = sw.to
			// Other arguments: no operation of theirs is live under either key.
			other := e.Do(ctx, call("alice", "r-switch", `{"sku":"A-1","qty":3}`))
			want(t, other, idem.Created) // not blocked, not replayed
			replays(t, e.Do(ctx, call("alice", "r-switch", order)), first, "the first arguments no longer replay the first result")
			replays(t, e.Do(ctx, call("alice", "r-switch", `{"sku":"A-1","qty":3}`)), other, "the second operation does not replay")
			sw.then(t, e, first, other)
			effects(t, e, 2)
		})
	}

	// altClaim claims, under PolicyArguments, the record of c whose AltKey
	// is c's key under PolicyRequest, after a record put under that key
	// (old, its fields as the test sets them) with an effect of its own.
	// It returns what the second claim answered.
	altClaim := func(t *testing.T, e *harness[W], c idem.Call, old func(*idem.Record), advance time.Duration) (idem.Record, *idem.Record) {
		t.Helper()
		k, err := idem.KeyOf(idem.PolicyArguments, c)
		must(t, err)
		kr, err := idem.KeyOf(idem.PolicyRequest, c)
		must(t, err)
		if k.AltID != kr.ID || kr.AltID != k.ID {
			t.Fatalf("AltID: %s and %s, want each other's key (%s, %s)", k.AltID, kr.AltID, kr.ID, k.ID)
		}
		now := e.Now()
		prev := idem.Record{Key: kr.ID, State: idem.StateCompleted, Tenant: c.Tenant, Owner: c.Owner, Function: c.Function,
			Fingerprint: kr.Fingerprint, Result: []byte(`{"order_id":"old"}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		old(&prev)
		held, err := e.F.Store.Claim(ctx, prev, e.F.Write("old"), now)
		if err != nil || held != nil {
			t.Fatalf("claim of the record under the other key: held %v, err %v", held, err)
		}
		e.Advance(advance)
		now = e.Now()
		rec := idem.Record{Key: k.ID, AltKey: k.AltID, State: idem.StateCompleted, Tenant: c.Tenant, Owner: c.Owner,
			Function: c.Function, Fingerprint: k.Fingerprint, Result: []byte(`{"order_id":"new"}`),
			CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		held, err = e.F.Store.Claim(ctx, rec, e.F.Write("new"), now)
		must(t, err)
		return rec, held
	}

	t.Run("a live record under the other key with the call's tenant and fingerprint holds it: nothing written, that record returned", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		c := call("alice", "r-alt", order)
		rec, held := altClaim(t, e, c, func(*idem.Record) {}, time.Hour) // its last second: still live
		if held == nil || held.Key != rec.AltKey || string(held.Result) != `{"order_id":"old"}` {
			t.Fatalf("held %+v, want the record under the other key %s", held, rec.AltKey)
		}
		if held.Tenant != rec.Tenant || held.Owner != rec.Owner || held.Fingerprint != rec.Fingerprint || held.State != idem.StateCompleted {
			t.Fatalf("the record held %+v is not the call's completed operation: it would not replay", held)
		}
		effects(t, e, 1)
		// Nothing was claimed under the call's own key: without AltKey it is free.
		rec.AltKey = ""
		held, err := e.F.Store.Claim(ctx, rec, e.F.Write("new"), e.Now())
		if err != nil || held != nil {
			t.Fatalf("the call's own key was claimed: held %+v, err %v", held, err)
		}
		effects(t, e, 2)
	})

	t.Run("a record under the other key with other arguments does not hold the call", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		c := call("alice", "r-alt", order)
		other, err := idem.KeyOf(idem.PolicyRequest, call("alice", "r-alt", `{"sku":"A-1","qty":3}`))
		must(t, err)
		_, held := altClaim(t, e, c, func(r *idem.Record) { r.Fingerprint = other.Fingerprint }, 0)
		if held != nil {
			t.Fatalf("held by %+v, a record of other arguments", held)
		}
		effects(t, e, 2)
	})

	t.Run("a record under the other key of another tenant does not hold the call", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		_, held := altClaim(t, e, call("alice", "r-alt", order), func(r *idem.Record) { r.Tenant, r.Owner = "tenant-b", "bob" }, 0)
		if held != nil {
			t.Fatalf("held by %+v, a record of another tenant", held)
		}
		effects(t, e, 2)
	})

	t.Run("an expired record under the other key does not hold the call", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		_, held := altClaim(t, e, call("alice", "r-alt", order), func(*idem.Record) {}, time.Hour+time.Second)
		if held != nil {
			t.Fatalf("held by %+v, an expired record", held)
		}
		effects(t, e, 2)
	})

	t.Run("tenants are key spaces: the same request in two tenants is two operations", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		a := e.Do(ctx, call("alice", "shared", order))
		b := e.Do(ctx, call("bob", "shared", order))
		want(t, a, idem.Created)
		want(t, b, idem.Created)
		if a.Key == b.Key {
			t.Fatal("two tenants share a key")
		}
		effects(t, e, 2)
	})

	t.Run("the function name is the namespace: two functions are two operations", func(t *testing.T) {
		e := env(t, idem.PolicyRequest)
		c := call("alice", "r1", order)
		want(t, e.Do(ctx, c), idem.Created)
		c.Function = "refund"
		want(t, e.Do(ctx, c), idem.Created)
		effects(t, e, 2)
	})

	t.Run("another owner of the key: conflict, nothing disclosed or written", func(t *testing.T) {
		for _, policy := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
			e := env(t, policy)
			want(t, e.Do(ctx, call("alice", "r1", order)), idem.Created)
			o := e.Do(ctx, call("carol", "r1", order))
			want(t, o, idem.Conflict)
			if o.Result != nil {
				t.Fatalf("conflict disclosed %s", o.Result)
			}
			effects(t, e, 1)
		}
	})

	t.Run("a pending record answers in progress and is never taken over while it lives", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		c, pending, now := keyed(t, e, "r-pending", idem.StatePending, nil)
		var none W
		held, err := e.F.Store.Claim(ctx, pending, none, now)
		if err != nil || held != nil {
			t.Fatalf("pending claim: held %v, err %v", held, err)
		}
		for range 3 {
			want(t, e.Do(ctx, c), idem.InProgress)
		}
		e.Advance(time.Hour) // its last second: still live
		want(t, e.Do(ctx, c), idem.InProgress)
		want(t, e.Do(ctx, call("carol", "r-pending", order)), idem.Conflict) // the owner is checked first
		effects(t, e, 0)
		e.Advance(time.Second) // expired: absent
		want(t, e.Do(ctx, c), idem.Created)
		effects(t, e, 1)
	})

	t.Run("expired but present is absent: reclaimed once, the earlier effect stays", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		first := e.Do(ctx, call("alice", "r1", order))
		want(t, first, idem.Created)
		e.Advance(retention + time.Second)
		second := e.Do(ctx, call("alice", "r1", order))
		want(t, second, idem.Created)
		third := e.Do(ctx, call("alice", "r1", order))
		want(t, third, idem.Replayed)
		if string(third.Result) != string(second.Result) || string(second.Result) == string(first.Result) {
			t.Fatalf("reclaim: first %s second %s third %s", first.Result, second.Result, third.Result)
		}
		effects(t, e, 2)
	})

	t.Run("inside the retention the key still replays", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		first := e.Do(ctx, call("alice", "r1", order))
		e.Advance(retention - time.Second)
		replays(t, e.Do(ctx, call("alice", "r1", order)), first, "replayed another result")
	})

	t.Run("refused writes write nothing and claim nothing", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		c := call("alice", "r-refused", order)
		o := e.Guard.Do(ctx, c, func(idem.Claim) ([]byte, W, error) {
			return []byte(`{"order_id":"never"}`), e.F.Refuse(), nil
		})
		want(t, o, idem.Refused)
		var refused *idem.RefusedError
		if !errors.As(o.Err, &refused) {
			t.Fatalf("refused without a RefusedError: %v", o.Err)
		}
		effects(t, e, 0)
		want(t, e.Do(ctx, c), idem.Created) // the key was not claimed
		effects(t, e, 1)
	})

	t.Run("a write of the caller's that fails inside the transaction leaves nothing", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		want(t, e.Guard.Do(ctx, call("alice", "r-taken", order), func(idem.Claim) ([]byte, W, error) {
			return []byte(`{"order_id":"same"}`), e.F.Write("same"), nil
		}), idem.Created)
		o := e.Guard.Do(ctx, call("alice", "r-new", order), func(idem.Claim) ([]byte, W, error) {
			return []byte(`{"order_id":"same"}`), e.F.Write("same"), nil // the effect's id is taken
		})
		if o.Status != idem.Refused {
			t.Fatalf("status = %v (%v), want refused", o.Status, o.Err)
		}
		effects(t, e, 1)
		want(t, e.Do(ctx, call("alice", "r-new", order)), idem.Created)
	})

	t.Run("a result that is not UTF-8 is replayed byte for byte, or refused as failed with nothing written", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		c := call("alice", "r-bytes", order)
		first := e.Guard.Do(ctx, c, func(idem.Claim) ([]byte, W, error) {
			return []byte("\xff a \xfe"), e.F.Write("bytes"), nil
		})
		switch first.Status {
		case idem.Created:
			replays(t, e.Do(ctx, c), first, "a result that is not UTF-8 came back changed")
			effects(t, e, 1)
		case idem.Failed:
			effects(t, e, 0)
			want(t, e.Do(ctx, c), idem.Created) // the key was not claimed
		default:
			t.Fatalf("status = %v (%v), want created or failed", first.Status, first.Err)
		}
	})

	t.Run("an effect that fails writes nothing", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		boom := errors.New("boom")
		o := e.Guard.Do(ctx, call("alice", "r1", order), func(idem.Claim) ([]byte, W, error) {
			var none W
			return nil, none, boom
		})
		if o.Status != idem.Failed || !errors.Is(o.Err, boom) {
			t.Fatalf("outcome %v (%v), want failed with the effect's error", o.Status, o.Err)
		}
		want(t, e.Do(ctx, call("alice", "r1", order)), idem.Created)
	})

	t.Run("a call that cannot be keyed is invalid and reaches no store", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		ran := false
		for _, c := range []idem.Call{call("alice", "", order), call("alice", "r1", `[1]`), call("alice", "r1", `{"a":1,"a":2}`),
			{Tenant: "tenant-a", RequestID: "r1", Function: "f", Arguments: []byte(order)}} {
			o := e.Guard.Do(ctx, c, func(idem.Claim) ([]byte, W, error) {
				ran = true
				var none W
				return []byte(`{}`), none, nil
			})
			if o.Status != idem.Invalid || !errors.Is(o.Err, idem.ErrInvalid) {
				t.Fatalf("%+v: %v (%v), want invalid", c, o.Status, o.Err)
			}
		}
		if ran {
			t.Fatal("the effect ran for a call without a key")
		}
		effects(t, e, 0)
	})

	t.Run("a context that has ended answers busy and writes nothing; the repeat creates", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		o := e.Do(cctx, call("alice", "r-cancel", order))
		want(t, o, idem.Busy)
		if !errors.Is(o.Err, idem.ErrBusy) {
			t.Fatalf("busy without ErrBusy: %v", o.Err)
		}
		effects(t, e, 0)
		want(t, e.Do(ctx, call("alice", "r-cancel", order)), idem.Created)
	})

	t.Run("a context that ends during the caller's writes answers busy, not refused; the repeat resolves it", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		if e.F.Cancel == nil {
			t.Skip("the fixture has no writes that end the context (Fixture.Cancel)")
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		c := call("alice", "r-ended", order)
		o := e.Guard.Do(cctx, c, func(idem.Claim) ([]byte, W, error) {
			return []byte(`{"order_id":"ended"}`), e.F.Cancel("ended", cancel), nil
		})
		if cctx.Err() == nil {
			t.Fatal("the context did not end: the store did not run the fixture's Cancel writes")
		}
		want(t, o, idem.Busy)
		if !errors.Is(o.Err, idem.ErrBusy) {
			t.Fatalf("busy without ErrBusy: %v", o.Err)
		}
		switch again := e.Do(ctx, c); again.Status {
		case idem.Created: // the ended claim wrote nothing
		case idem.Replayed: // it had committed before its answer was lost
			if string(again.Result) != `{"order_id":"ended"}` {
				t.Fatalf("replayed %s, want the ended claim's result", again.Result)
			}
		default:
			t.Fatalf("repeat: %v (%v), want created or replayed", again.Status, again.Err)
		}
		effects(t, e, 1)
	})

	t.Run("a record that cannot hold its key is refused as invalid, nothing written; the key stays free", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		c, valid, now := keyed(t, e, "r-invalid", idem.StateCompleted, []byte(`{"order_id":"never"}`))
		for _, tc := range []struct {
			name   string
			change func(*idem.Record)
		}{
			{"an empty key", func(r *idem.Record) { r.Key = "" }},
			{"no state", func(r *idem.Record) { r.State = "" }},
			{"an unknown state", func(r *idem.Record) { r.State = "done" }},
			{"completed without a result", func(r *idem.Record) { r.Result = nil }},
			{"completed with an empty result", func(r *idem.Record) { r.Result = []byte{} }},
			{"pending without an expiry", func(r *idem.Record) { r.State, r.Result, r.ExpiresAt = idem.StatePending, nil, time.Time{} }},
			{"no expiry", func(r *idem.Record) { r.ExpiresAt = time.Time{} }},
			{"expiring now", func(r *idem.Record) { r.ExpiresAt = now }},
			{"expired", func(r *idem.Record) { r.ExpiresAt = now.Add(-time.Hour) }},
		} {
			rec := valid
			tc.change(&rec)
			held, err := e.F.Store.Claim(ctx, rec, e.F.Write("invalid"), now)
			if !errors.Is(err, idem.ErrInvalid) || held != nil {
				t.Fatalf("%s: held %v, err %v; want an error wrapping ErrInvalid", tc.name, held, err)
			}
			effects(t, e, 0)
		}
		first := e.Do(ctx, c)
		want(t, first, idem.Created) // nothing claimed the key
		replays(t, e.Do(ctx, c), first, "the key's later claim does not replay")
		effects(t, e, 1)
	})

	t.Run("busy after a commit: the repeat with the same data replays, one effect", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		e.Guard.Store = commitThenBusy[W]{e.F.Store}
		o := e.Do(ctx, call("alice", "r-amb", order))
		want(t, o, idem.Busy)
		e.Guard.Store = e.F.Store
		again := e.Do(ctx, call("alice", "r-amb", order))
		want(t, again, idem.Replayed)
		if string(again.Result) != `{"order_id":"effect-1"}` {
			t.Fatalf("replayed %s, want the committed effect-1", again.Result)
		}
		effects(t, e, 1)
	})

	t.Run("a restart replays the stored result", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		if e.F.Reopen == nil {
			t.Skip("the store keeps nothing across a restart")
		}
		first := e.Do(ctx, call("alice", "r1", order))
		want(t, first, idem.Created)
		e.Guard.Store = e.F.Reopen(t)
		replays(t, e.Do(ctx, call("alice", "r1", order)), first, "after a restart, another result")
	})

	t.Run("concurrent: 10 identical calls make one effect, 9 replay its result", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		outs, created := race(t, e, 10, func(int) idem.Call { return call("alice", "r-conc", order) },
			map[idem.Status]int{idem.Created: 1, idem.Replayed: 9}, "1 created and 9 replayed")
		for _, o := range outs {
			if string(o.Result) != created {
				t.Fatalf("result %s, want %s", o.Result, created)
			}
		}
		effects(t, e, 1)
	})

	t.Run("concurrent: two owners racing for one key, one wins, the other is a conflict", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		owners := []string{"alice", "carol"}
		race(t, e, 8, func(i int) idem.Call { return call(owners[i%2], "r-race", order) },
			map[idem.Status]int{idem.Created: 1, idem.Replayed: 3, idem.Conflict: 4}, "1 created, 3 replayed (the winner's), 4 conflicts")
		effects(t, e, 1)
	})

	t.Run("concurrent: policy request, two argument sets racing: one wins, the other set is a mismatch", func(t *testing.T) {
		e := env(t, idem.PolicyRequest)
		args := []string{order, `{"sku":"B-2","qty":1}`}
		race(t, e, 8, func(i int) idem.Call { return call("alice", "r-args", args[i%2]) },
			map[idem.Status]int{idem.Created: 1, idem.Replayed: 3, idem.Mismatch: 4}, "1 created, 3 replayed, 4 mismatches")
		effects(t, e, 1)
	})

	t.Run("concurrent: two reclaimers of an expired key make one new effect", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		want(t, e.Do(ctx, call("alice", "r1", order)), idem.Created)
		e.Advance(retention + time.Hour)
		race(t, e, 2, func(int) idem.Call { return call("alice", "r1", order) },
			map[idem.Status]int{idem.Created: 1, idem.Replayed: 1}, "1 created, 1 replayed")
		effects(t, e, 2)
	})

	t.Run("concurrent: the same call under both policies at once (old and new instances side by side) makes one effect", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		other := *e.Guard
		other.Policy = idem.PolicyRequest
		guards := []*idem.Guard[W]{e.Guard, &other}
		outs := concurrent(8, func(i int) idem.Outcome {
			return guards[i%2].Do(ctx, call("alice", "r-both", order), func(idem.Claim) ([]byte, W, error) {
				id := fmt.Sprintf("effect-%d", e.effects.Add(1))
				return []byte(`{"order_id":"` + id + `"}`), e.F.Write(id), nil
			})
		})
		if counts, _ := tally(t, outs); !maps.Equal(counts, map[idem.Status]int{idem.Created: 1, idem.Replayed: 7}) {
			t.Fatalf("outcomes %v, want 1 created and 7 replayed", counts)
		}
		effects(t, e, 1)
	})

	t.Run("concurrent: 12 distinct calls are 12 operations, none lost", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		race(t, e, 12, func(i int) idem.Call { return call("alice", fmt.Sprintf("r-%d", i), order) },
			map[idem.Status]int{idem.Created: 12}, "12 created")
		effects(t, e, 12)
	})
}

// commitThenBusy commits through the real store, then reports busy: the
// write happened but the caller cannot know it (a timeout after commit).
type commitThenBusy[W any] struct{ idem.Store[W] }

func (s commitThenBusy[W]) Claim(ctx context.Context, rec idem.Record, writes W, now time.Time) (*idem.Record, error) {
	if held, err := s.Store.Claim(ctx, rec, writes, now); err != nil || held != nil {
		return held, err
	}
	return nil, fmt.Errorf("%w: a timeout after the commit", idem.ErrBusy)
}

// concurrent runs n calls at once and returns their outcomes in order.
func concurrent(n int, call func(i int) idem.Outcome) []idem.Outcome {
	outs := make([]idem.Outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			outs[i] = call(i)
		})
	}
	close(start)
	wg.Wait()
	return outs
}

// tally counts outcomes by status and returns the created one's result.
// Every replay must carry it; a failed or busy outcome fails the test.
func tally(t *testing.T, outs []idem.Outcome) (map[idem.Status]int, string) {
	t.Helper()
	counts := map[idem.Status]int{}
	created := ""
	for _, o := range outs {
		counts[o.Status]++
		switch o.Status {
		case idem.Created:
			created = string(o.Result)
		case idem.Failed, idem.Busy:
			t.Errorf("%v: %v", o.Status, o.Err)
		}
	}
	for _, o := range outs {
		if o.Status == idem.Replayed && string(o.Result) != created {
			t.Errorf("replayed %s, created %s", o.Result, created)
		}
	}
	return counts, created
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
