package dynamostore_test

import (
	"context"
	"sync/atomic"
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
			effect := func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
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

// BenchmarkRepeatCache is a repeat landing on a warm instance (a
// completed record holds the key, and this process made or saw it), on
// DynamoDB Local, with and without idem.Cache, with and without
// ReadAhead: ns/op and the DynamoDB requests each repeat sends
// (requests/op, every request counted, a read-ahead's included).
func BenchmarkRepeatCache(b *testing.B) {
	endpoint := testenv.DynamoDB(b)
	var requests atomic.Int64
	client, name := testenv.DynamoClient(b, endpoint, testenv.CountCalls(&requests)), testenv.CreateTable(b, endpoint)
	for _, tc := range []struct {
		name      string
		readAhead bool
		cache     bool
	}{
		{"transaction", false, false}, {"read-ahead", true, false}, {"cache", false, true}, {"cache+read-ahead", true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			store := dynamostore.New(client, name, dynamostore.Options{ReadAhead: tc.readAhead})
			g := &idem.Guard[[]types.TransactWriteItem]{Store: store, Retention: time.Hour}
			if tc.cache {
				g.Cache = idem.NewCache(1024)
			}
			c := call("alice", "bench-cache-"+tc.name, `{"sku":"A-1"}`)
			plan := func(cl idem.Claim) ([]byte, []types.TransactWriteItem, error) {
				return []byte(`{"order_id":"o-1"}`), []types.TransactWriteItem{effectItem("bench-cache-" + cl.Key.ID)}, nil
			}
			wantStatus(b, g.Do(context.Background(), c, plan), idem.Created) // the instance is warm from here
			store.Wait()
			before := requests.Load()
			for b.Loop() {
				if o := g.Do(context.Background(), c, plan); o.Status != idem.Replayed {
					b.Fatalf("%v %v", o.Status, o.Err)
				}
			}
			store.Wait()
			b.ReportMetric(float64(requests.Load()-before)/float64(b.N), "requests/op")
		})
	}
}
