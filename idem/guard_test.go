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
			plan := idem.Plan[memstore.Writes](func(idem.OpKey) ([]byte, memstore.Writes, error) {
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
			func(idem.OpKey) ([]byte, memstore.Writes, error) { return []byte(`{}`), nil, nil })
		if o.Status != idem.Created {
			t.Fatalf("%s: %v (%v), want created", args, o.Status, o.Err)
		}
	}
}
