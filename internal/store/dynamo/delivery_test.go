package dynamo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/benchtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/matrixtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/storetest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// deliveryHarness opens a fresh table per test; Corrupt writes a
// created_at no ticket can be read with.
var deliveryHarness = deliverytest.Harness{
	Open: func(t *testing.T) deliverytest.Adapter {
		s, _ := newTable(t)
		return s
	},
	Corrupt: func(t *testing.T, s deliverytest.Adapter, id string) {
		ts := s.(tableStore)
		_, err := ts.client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName: &ts.table, Key: map[string]types.AttributeValue{dynamo.PartitionKey: &types.AttributeValueMemberS{Value: "TICKET#" + id}},
			UpdateExpression:          aws.String("SET created_at = :bad"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":bad": &types.AttributeValueMemberS{Value: "yesterday"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	},
}

func TestDeliveryConformance(t *testing.T) {
	deliverytest.Run(t, deliveryHarness)
}

func TestSettleStale(t *testing.T) {
	s, _ := newTable(t)
	storetest.CheckSettleStale(t, s)
}

// With a destination configured the callback still costs one DynamoDB call
// (the outbox rides in the transaction), and delivering a ticket costs two:
// the claim and the result. A sweep adds one Query per batch. The claim's
// read-ahead is off here: this test counts what delivery adds to the
// transaction (nothing), and the read beside it is the same with or
// without a destination (TestRoundTripsPerCallback counts it).
func TestDeliveryRoundTrips(t *testing.T) {
	r := newRoundTrips(t, testenv.DynamoDB(t), dynamo.Options{NoReadAhead: true})
	ctx := context.Background()
	r.svc.Deliver = true
	r.call("warm-up") // the user cache's first read
	var ids []string
	for i, st := range []roundTrip{
		{"callback with a destination, new operation", "r1", core.KindCreated, 1},
		{"callback with a destination, repeat", "r1", core.KindDuplicate, 1},
		{"callback with a destination, second new operation", "r2", core.KindCreated, 1},
		{"callback with a destination, repeat of the second", "r2", core.KindDuplicate, 1},
	} {
		o, n := r.call(st.rid)
		t.Logf("%s: %d DynamoDB requests", st.name, n) // read back by make bench
		if o.Kind != st.want || n != st.wantCalls {
			t.Fatalf("step %d: kind %v with %d DynamoDB calls, want %v with %d", i, o.Kind, n, st.want, st.wantCalls)
		}
		if o.Kind == core.KindCreated {
			ids = append(ids, coretest.TicketID(o))
		}
	}
	dest := &deliverytest.CountingDest{}
	eng := &delivery.Engine{Store: r.store, Destination: dest}
	before := r.calls.Load()
	if st, err := eng.Deliver(ctx, ids[0]); err != nil || st != delivery.StateDelivered {
		t.Fatalf("Deliver: %s, %v", st, err)
	}
	n := r.calls.Load() - before
	// The claim, the result, and the read of what follows the ticket once
	// it is delivered (delivery.Sequencer.Neighbours: a follow-up that
	// waited for it goes at once).
	t.Logf("delivering one ticket (claim, result, what follows it): %d DynamoDB requests", n) // read back by make bench
	if n != 3 {
		t.Fatalf("DynamoDB calls per delivered ticket = %d, want 3", n)
	}
	// The worker's sweep: one Query, then three calls per ticket.
	before = r.calls.Load()
	deadline := time.Now().Add(10 * time.Second)
	moved := 0
	for moved == 0 && time.Now().Before(deadline) { // the index is eventually consistent
		before = r.calls.Load()
		moved = deliverytest.Sweep(ctx, eng, 16) // a worker's default concurrency
	}
	if moved != 2 {
		t.Fatalf("sweep moved %d, want 2 (warm-up and r2)", moved)
	}
	n = r.calls.Load() - before
	t.Logf("a worker's sweep delivering 2 tickets (one Query, then claim, result and what follows each): %d DynamoDB requests", n) // read back by make bench
	if n != 1+2*3 {
		t.Fatalf("DynamoDB calls for a sweep of 2 = %d, want 7", n)
	}
	if dest.N.Load() != 3 {
		t.Fatalf("sends = %d, want 3", dest.N.Load())
	}
}

// The due index is sparse: a final ticket leaves it, and a ticket created
// without a destination never enters it.
func TestDeliveryIndexIsSparse(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	e := deliverytest.NewEnv(t, s.Store, true)
	live := e.Create(`{"title":"live"}`)
	done := e.Create(`{"title":"done"}`)
	plain := deliverytest.NewEnv(t, s.Store, false).Create(`{"title":"plain"}`)
	if _, err := e.Claim(done, "w"); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, done, "w", delivery.Update{State: delivery.StateDelivered, Attempts: 1, ExternalID: "1", DeliveredAt: e.Now}); err != nil {
		t.Fatal(err)
	}
	out, err := s.client.Scan(ctx, &dynamodb.ScanInput{TableName: &s.table, IndexName: aws.String(dynamo.DeliveryDueIndex)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, item := range out.Items {
		keys = append(keys, item[dynamo.PartitionKey].(*types.AttributeValueMemberS).Value)
	}
	if len(keys) != 1 || keys[0] != "TICKET#"+live {
		t.Fatalf("index holds %v, want only TICKET#%s (not %s, %s)", keys, live, done, plain)
	}
}

// A worker process killed before, during and after its send: the next
// worker finishes the ticket, and the helpdesk holds it once.
func TestDeliveryWorkerKilled(t *testing.T) {
	s, endpoint := newTable(t)
	deliverytest.Kill(t, s.Store, envEndpoint+"="+endpoint, envTable+"="+s.table)
}

// A table created without the due index gains it, and the delivery store
// works on it.
func TestEnsureDeliveryIndexOnExistingTable(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	client := testenv.DynamoClient(t, endpoint)
	ctx := context.Background()
	table := fmt.Sprintf("old-%d", time.Now().UnixNano())
	if _, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(dynamo.PartitionKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(dynamo.PartitionKey), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	s := dynamo.New(client, table, dynamo.Options{})
	if _, err := s.Due(ctx, time.Now(), 10); err == nil {
		t.Fatal("Due on a table without the index: no error")
	}
	for i, want := range []bool{true, false} {
		added, err := dynamo.EnsureDeliveryIndex(ctx, client, table)
		if err != nil || added != want {
			t.Fatalf("call %d: added %v, %v; want %v", i, added, err, want)
		}
	}
	e := deliverytest.NewEnv(t, s, true)
	id := e.Create(`{"title":"after the index"}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids, err := s.Due(ctx, e.Now, 10)
		if err == nil && len(ids) == 1 && ids[0] == id {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Due = %v, %v; want [%s]", ids, err, id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The engine over DynamoDB Local against the fake helpdesk, under each
// failure mode: every ticket reaches the helpdesk at most once and ends as
// the mode says.
func TestDeliveryFailureMatrix(t *testing.T) {
	matrixtest.Run(t, deliveryHarness)
}

// BenchmarkDeliveryLocalWorker: the local server's worker on DynamoDB
// Local delivering to the fake helpdesk answering in 50 ms (tickets/s,
// p50/p99 from commit to delivered).
func BenchmarkDeliveryLocalWorker(b *testing.B) {
	endpoint := testenv.DynamoDB(b)
	table := testenv.CreateTable(b, endpoint)
	benchtest.LocalWorker(b, dynamo.New(testenv.DynamoClient(b, endpoint), table, dynamo.Options{}))
}

// The follow-ups on DynamoDB Local against each destination of the fake
// helpdesk: in order under concurrency and faults, exactly once.
func TestFollowUpDelivery(t *testing.T) {
	matrixtest.RunFollowUps(t, deliveryHarness)
}
