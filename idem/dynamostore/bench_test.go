package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// BenchmarkRepeat is the latency of a repeat (a completed record holds
// the key) on DynamoDB Local: answered by the transaction's failed
// condition, or with ReadAhead by the strongly consistent read sent
// beside it.
func BenchmarkRepeat(b *testing.B) {
	endpoint := testenv.DynamoDB(b)
	client, name := testenv.DynamoClient(b, endpoint), testenv.CreateTable(b, endpoint)
	for _, readAhead := range []bool{false, true} {
		b.Run(map[bool]string{false: "transaction", true: "read-ahead"}[readAhead], func(b *testing.B) {
			g := &idem.Guard[[]types.TransactWriteItem]{
				Store: dynamostore.New(client, name, dynamostore.Options{ReadAhead: readAhead}), Retention: time.Hour,
			}
			c := call("alice", "bench-repeat", `{"sku":"A-1"}`)
			effect := func(idem.OpKey) ([]byte, []types.TransactWriteItem, error) {
				return []byte(`{"order_id":"o-1"}`), []types.TransactWriteItem{effectItem("bench-" + time.Now().Format(time.RFC3339Nano))}, nil
			}
			if o := g.Do(context.Background(), c, effect); o.Status != idem.Created && o.Status != idem.Replayed {
				b.Fatalf("setup: %v %v", o.Status, o.Err)
			}
			for b.Loop() {
				if o := g.Do(context.Background(), c, effect); o.Status != idem.Replayed {
					b.Fatalf("%v %v", o.Status, o.Err)
				}
			}
		})
	}
}
