package idem_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/memstore"
)

// A Guard or a call that Do cannot run safely is answered with a status
// and an error naming the cause, never a panic, and the plan does not
// run: a policy that is neither of the two (it would turn off the
// Mismatch check), no store, a retention under a second (expiry is kept
// in whole seconds), no plan, no arguments.
func TestDoRefusesWhatItCannotRunSafely(t *testing.T) {
	call := idem.Call{Tenant: "shop-1", Owner: "c-7", RequestID: "req-1", Function: "create_order", Arguments: []byte(`{}`)}
	noArgs := call
	noArgs.Arguments = nil
	for _, tc := range []struct {
		name   string
		guard  idem.Guard[memstore.Writes]
		call   idem.Call
		noPlan bool
		want   idem.Status
		err    string
	}{
		{"a mistyped policy", idem.Guard[memstore.Writes]{Store: memstore.New(), Policy: "Request", Retention: time.Hour}, call, false,
			idem.Invalid, `Guard.Policy: key policy "Request"`},
		{"no store", idem.Guard[memstore.Writes]{Retention: time.Hour}, call, false, idem.Failed, "idem: Guard.Store is nil"},
		{"a retention under a second", idem.Guard[memstore.Writes]{Store: memstore.New(), Retention: 500 * time.Millisecond}, call, false,
			idem.Failed, "Guard.Retention must be at least a second"},
		{"no plan", idem.Guard[memstore.Writes]{Store: memstore.New(), Retention: time.Hour}, call, true, idem.Failed, "idem: the plan is nil"},
		{"no arguments", idem.Guard[memstore.Writes]{Store: memstore.New(), Retention: time.Hour}, noArgs, false,
			idem.Invalid, "no arguments: send {} for none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			plan := idem.Plan[memstore.Writes](func(idem.Claim) ([]byte, memstore.Writes, error) {
				ran = true
				return []byte(`{}`), nil, nil
			})
			if tc.noPlan {
				plan = nil
			}
			o := tc.guard.Do(context.Background(), tc.call, plan)
			if o.Status != tc.want || o.Err == nil || !strings.Contains(o.Err.Error(), tc.err) {
				t.Fatalf("Do = %v (%v), want %v with an error saying %q", o.Status, o.Err, tc.want, tc.err)
			}
			if ran {
				t.Fatal("the plan ran")
			}
		})
	}
}

// An empty Policy is PolicyArguments: other arguments for the same
// request are a new operation, not a Mismatch.
func TestEmptyPolicyIsPolicyArguments(t *testing.T) {
	g := &idem.Guard[memstore.Writes]{Store: memstore.New(), Retention: time.Hour}
	for _, args := range []string{`{"qty":1}`, `{"qty":2}`} {
		o := g.Do(context.Background(), idem.Call{Tenant: "shop-1", Owner: "c-7", RequestID: "req-1", Function: "create_order", Arguments: []byte(args)},
			func(idem.Claim) ([]byte, memstore.Writes, error) { return []byte(`{}`), nil, nil })
		if o.Status != idem.Created {
			t.Fatalf("%s: %v (%v), want created", args, o.Status, o.Err)
		}
	}
}

// Judge accepts a held record under the call's own key or under its
// AltKey, and only one of those: a record under another key, or one under
// the AltKey of another tenant or other arguments (which a store must not
// return), is Failed, never replayed.
func TestJudgeOfARecordUnderTheOtherKey(t *testing.T) {
	c := idem.Call{Tenant: "shop-1", Owner: "c-7", RequestID: "req-1", Function: "create_order", Arguments: []byte(`{"qty":1}`)}
	k, err := idem.KeyOf(idem.PolicyArguments, c)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := idem.Record{Key: k.ID, AltKey: k.AltID, State: idem.StateCompleted, Tenant: c.Tenant, Owner: c.Owner,
		Function: c.Function, Fingerprint: k.Fingerprint, Result: []byte(`{"new":1}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	held := func(edit func(*idem.Record)) *idem.Record {
		h := rec
		h.AltKey, h.Key, h.Result = "", k.AltID, []byte(`{"old":1}`)
		edit(&h)
		return &h
	}
	for _, tc := range []struct {
		name string
		held *idem.Record
		want idem.Status
		key  string
	}{
		{"under the other key", held(func(*idem.Record) {}), idem.Replayed, k.AltID},
		{"under the other key, another owner", held(func(h *idem.Record) { h.Owner = "c-8" }), idem.Conflict, k.AltID},
		{"under the other key, pending", held(func(h *idem.Record) { h.State, h.Result = idem.StatePending, nil }), idem.InProgress, k.AltID},
		{"under a third key", held(func(h *idem.Record) { h.Key = "other" }), idem.Failed, k.ID},
		{"under the other key, other arguments", held(func(h *idem.Record) { h.Fingerprint = "0" }), idem.Failed, k.ID},
		{"under the other key, another tenant", held(func(h *idem.Record) { h.Tenant = "shop-2" }), idem.Failed, k.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := idem.Judge(idem.PolicyArguments, rec, tc.held, nil)
			if o.Status != tc.want || o.Key != tc.key {
				t.Fatalf("Judge = %v from key %s (%v), want %v from %s", o.Status, o.Key, o.Err, tc.want, tc.key)
			}
			if tc.want == idem.Replayed && string(o.Result) != `{"old":1}` {
				t.Fatalf("replayed %s, want the held record's result", o.Result)
			}
		})
	}
	// Without an AltKey the same record is not this call's.
	noAlt := rec
	noAlt.AltKey = ""
	if o := idem.Judge(idem.PolicyArguments, noAlt, held(func(*idem.Record) {}), nil); o.Status != idem.Failed {
		t.Fatalf("Judge without AltKey = %v, want failed", o.Status)
	}
}

// KeyOf's AltID is the key Key derives under the other policy, and Other
// pairs the two policies (the empty default is PolicyArguments).
func TestAltIDIsTheOtherPolicysKey(t *testing.T) {
	c := idem.Call{Tenant: "shop-1", Owner: "c-7", RequestID: "req-1", Function: "create_order", Arguments: []byte(`{"b":1,"a":2}`)}
	for _, p := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest, ""} {
		k, err := idem.KeyOf(p, c)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := idem.Key(p.Other(), c.Tenant, c.RequestID, c.Function, k.Canonical)
		if k.AltID != want || k.AltID == k.ID || p.Other().Other() == p.Other() {
			t.Fatalf("policy %q: AltID %s, want %s (ID %s, Other %q)", p, k.AltID, want, k.ID, p.Other())
		}
	}
	if idem.PolicyArguments.Other() != idem.PolicyRequest || idem.PolicyRequest.Other() != idem.PolicyArguments || idem.Policy("").Other() != idem.PolicyRequest {
		t.Fatal("Other does not pair the two policies")
	}
}
