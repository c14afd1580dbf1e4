package idem_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/memstore"
)

// The package doc's quick start, run: one Guard built and checked at
// start, and a call that is retried. The plan runs once; the retry is
// answered with the stored result, byte for byte.
func Example() {
	ctx := context.Background()
	refunds := 0
	saveRefund := func() error { refunds++; return nil } // the caller's write, committed with the claim
	g := &idem.Guard[memstore.Writes]{Store: memstore.New(), Retention: 24 * time.Hour}
	if err := g.Check(); err != nil {
		log.Fatal(err) // once, at start
	}
	rid, args := "req-1", []byte(`{"order":"o-1","cents":500}`)
	for range 2 { // the call, then its retry
		o := g.Do(ctx, idem.Call{Tenant: "shop-1", Owner: "c-7", RequestID: rid, Function: "refund", Arguments: args},
			func(cl idem.Claim) ([]byte, memstore.Writes, error) {
				return []byte(`{"refund":"` + cl.Key.ID[:8] + `"}`), saveRefund, nil
			})
		fmt.Println(o.Status, string(o.Result))
	}
	fmt.Println("refunds:", refunds)
	// Output:
	// created {"refund":"069223b4"}
	// replayed {"refund":"069223b4"}
	// refunds: 1
}
