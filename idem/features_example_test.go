package idem_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/memstore"
)

// claimCounter counts the claims that reach the store it wraps.
type claimCounter struct {
	idem.Store[memstore.Writes]
	n atomic.Int64
}

func (c *claimCounter) Claim(ctx context.Context, rec idem.Record, w memstore.Writes, now time.Time) (*idem.Record, error) {
	c.n.Add(1)
	return c.Store.Claim(ctx, rec, w, now)
}

// A Guard checked once at start: a misconfigured one fails there, with
// the cause, instead of answering every call Failed.
func ExampleGuard_Check() {
	g := &idem.Guard[memstore.Writes]{Store: memstore.New(), Policy: "requests", Retention: 24 * time.Hour}
	fmt.Println(g.Check())
	g.Policy = idem.PolicyRequest
	fmt.Println(g.Check())
	// Output:
	// idem: Guard.Policy: key policy "requests": want "arguments" or "request"
	// <nil>
}

// A Cache on the Guard: the repeats of a completed call on this process
// are answered without a store call, and still judged: another customer
// reusing the request id is a Conflict.
func ExampleCache() {
	store := &claimCounter{Store: memstore.New()}
	g := &idem.Guard[memstore.Writes]{Store: store, Retention: 24 * time.Hour, Cache: idem.NewCache(10_000)}
	refund := func(customer string) idem.Outcome {
		return g.Do(context.Background(), idem.Call{Tenant: "shop-1", Owner: customer, RequestID: "req-1", Function: "refund",
			Arguments: []byte(`{"order":"o-1"}`)},
			func(cl idem.Claim) ([]byte, memstore.Writes, error) { return []byte(`{"refund_id":"r-1"}`), nil, nil })
	}
	for _, customer := range []string{"c-7", "c-7", "c-7", "c-8"} {
		if o := refund(customer); o.Result != nil {
			fmt.Println(o.Status, string(o.Result))
		} else {
			fmt.Println(o.Status)
		}
	}
	fmt.Println("store claims:", store.n.Load())
	// Output:
	// created {"refund_id":"r-1"}
	// replayed {"refund_id":"r-1"}
	// replayed {"refund_id":"r-1"}
	// conflict
	// store claims: 1
}

// A Wait on the Guard: another writer of the store claimed the key
// before knowing its result (a pending record) and completes it while
// the Guard waits, which then replays it. Here the writer completes it
// during the Guard's second pause; Sleep moves a test clock instead of
// sleeping.
func ExampleWaitPolicy() {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := memstore.New()
	call := idem.Call{Tenant: "shop-1", Owner: "c-7", RequestID: "req-1", Function: "export", Arguments: []byte(`{}`)}
	k, _ := idem.KeyOf(idem.PolicyArguments, call)
	pending := idem.Record{Key: k.ID, State: idem.StatePending, Tenant: call.Tenant, Owner: call.Owner, Function: call.Function,
		Fingerprint: k.Fingerprint, CreatedAt: now, ExpiresAt: now.Add(2 * time.Second)}
	if _, err := store.Claim(context.Background(), pending, nil, now); err != nil {
		fmt.Println(err)
		return
	}
	pauses := 0
	g := &idem.Guard[memstore.Writes]{Store: store, Retention: time.Hour, Now: clock, Wait: idem.WaitPolicy{
		Max: 5 * time.Second, Initial: time.Second,
		Sleep: func(_ context.Context, d time.Duration) error {
			now = now.Add(d)
			if pauses++; pauses == 2 {
				// The other writer completes its record.
				done := pending
				done.State, done.Result = idem.StateCompleted, []byte(`{"export":"e-1"}`)
				done.ExpiresAt = now.Add(time.Hour).Truncate(time.Second)
				now = now.Add(2 * time.Second) // memstore replaces only an expired record
				_, _ = store.Claim(context.Background(), done, nil, now)
			}
			return nil
		},
	}}
	o := g.Do(context.Background(), call, func(idem.Claim) ([]byte, memstore.Writes, error) {
		return []byte(`{"export":"mine"}`), nil, nil
	})
	fmt.Println(o.Status, string(o.Result), "after", pauses, "pauses")
	// Output:
	// replayed {"export":"e-1"} after 2 pauses
}
