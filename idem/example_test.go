package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/memstore"
)

// A refund made idempotent with the in-memory store: the application
// mints the request id once and sends it with every retry. The refund
// and its claim are committed together; a retry replays the first
// result, another customer's reuse of the id is a conflict, and under
// PolicyRequest other arguments for the same request are refused.
func ExampleGuard() {
	ctx := context.Background()
	refunds := map[string]int{} // the caller's own state: refunds by id
	g := &idem.Guard[memstore.Writes]{
		Store:     memstore.New(),
		Policy:    idem.PolicyRequest,
		Retention: 24 * time.Hour,
	}
	refund := func(customer, requestID, args string) idem.Outcome {
		return g.Do(ctx, idem.Call{Tenant: "shop-1", Owner: customer, RequestID: requestID, Function: "refund", Arguments: []byte(args)},
			func(cl idem.Claim) ([]byte, memstore.Writes, error) {
				id := "refund-" + cl.Key.ID[:6]
				return []byte(`{"refund_id":"` + id + `"}`), func() error {
					if _, ok := refunds[id]; ok {
						return errors.New("refund exists")
					}
					refunds[id] = 1
					return nil
				}, nil
			})
	}
	for _, o := range []idem.Outcome{
		refund("customer-7", "req-1", `{"order":"o-1","cents":500}`),
		refund("customer-7", "req-1", `{"cents":500, "order":"o-1"}`), // a retry
		refund("customer-7", "req-1", `{"order":"o-1","cents":900}`),  // same request, other arguments
		refund("customer-8", "req-1", `{"order":"o-1","cents":500}`),  // another customer
		refund("customer-7", "", `{"order":"o-1","cents":500}`),       // no request id
	} {
		if o.Result != nil {
			fmt.Println(o.Status, string(o.Result))
		} else {
			fmt.Println(o.Status)
		}
	}
	fmt.Println("refunds:", len(refunds))
	// Output:
	// created {"refund_id":"refund-49560e"}
	// replayed {"refund_id":"refund-49560e"}
	// mismatch
	// conflict
	// invalid
	// refunds: 1
}
