package dynamo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/storetest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

const (
	envEndpoint = "DYNAMO_TEST_ENDPOINT"
	envTable    = "DYNAMO_TEST_TABLE"
)

func TestMain(m *testing.M) {
	deliverytest.KillMain(func() (delivery.Outbox, error) { return storeFromEnv() })
	storetest.ChildMain(func() (core.Store, error) { return storeFromEnv() })
	testenv.Main(m)
}

// storeFromEnv is the store a child process of a test opens: on the
// table and at the endpoint its parent names in the environment.
//
// Its calls wait up to childCallTimeout: DynamoDB Local, sharing two
// cores with four race-instrumented processes, can take longer than the
// production deadline to answer a transaction, and what the load tests
// count is the claim's outcome, not the emulator's latency. What a
// missed deadline answers (busy, and the repeat's replay) is the fault
// suite's subject.
func storeFromEnv() (*dynamo.Store, error) {
	client, err := testenv.NewDynamoClient(os.Getenv(envEndpoint))
	if err != nil {
		return nil, err
	}
	return dynamo.New(client, os.Getenv(envTable), dynamo.Options{CallTimeout: childCallTimeout}), nil
}

const childCallTimeout = 30 * time.Second

// tableStore is the adapter plus what the suite reads directly.
type tableStore struct {
	*dynamo.Store
	client *dynamodb.Client
	table  string
}

// CountTickets scans the table for TICKET# items.
func (s tableStore) CountTickets(ctx context.Context) (int, error) {
	n := 0
	p := dynamodb.NewScanPaginator(s.client, &dynamodb.ScanInput{
		TableName:                 &s.table,
		FilterExpression:          aws.String("begins_with(pk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "TICKET#"}},
		Select:                    types.SelectCount,
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return 0, err
		}
		n += int(page.Count)
	}
	return n, nil
}

func newTable(t *testing.T) (tableStore, string) {
	t.Helper()
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	client := testenv.DynamoClient(t, endpoint)
	return tableStore{Store: dynamo.New(client, table, dynamo.Options{}), client: client, table: table}, endpoint
}

// conformance opens a store on a fresh table, and reopens it, for the
// conformance suites.
var conformance = storetest.Harness{
	// The adapter reads no clock of its own: every time comes with the call.
	Open: func(t *testing.T, _ func() time.Time) (storetest.Adapter, func(*testing.T) storetest.Adapter) {
		s, _ := newTable(t)
		return s, func(t *testing.T) storetest.Adapter {
			// A restart is a new client on the same table.
			client := testenv.DynamoClient(t, testenv.DynamoDB(t))
			return tableStore{Store: dynamo.New(client, s.table, dynamo.Options{}), client: client, table: s.table}
		}
	},
}

func TestConformance(t *testing.T) {
	storetest.Run(t, conformance)
}

// The stored items have the attributes and types of docs/contract.md,
// Stored items.
func TestStoredItems(t *testing.T) {
	s, _ := newTable(t)
	e := storetest.NewEnv(t, s, idem.PolicyArguments)
	o := e.Create("user-a", "r1", `{"title":"Cannot sign in"}`)
	storetest.Want(t, o, core.KindCreated)
	get := func(pk string) map[string]types.AttributeValue {
		out, err := s.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &s.table,
			Key: map[string]types.AttributeValue{dynamo.PartitionKey: &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Fatalf("GetItem %s: %v", pk, err)
		}
		return out.Item
	}
	op := get("OP#" + o.Key)
	for name, want := range map[string]string{"state": "S", "tenant_id": "S", "user_id": "S", "function": "S",
		"fingerprint": "S", "result": "S", "created_at": "S", "expires_at": "N"} {
		if got := attrType(op[name]); got != want {
			t.Errorf("operation %s: type %s, want %s", name, got, want)
		}
	}
	var result map[string]any
	if err := json.Unmarshal([]byte(op["result"].(*types.AttributeValueMemberS).Value), &result); err != nil ||
		result["ticket_id"] != coretest.TicketID(o) || result["status"] != "created" {
		t.Errorf("result = %v, %v", result, err)
	}
	if _, err := time.Parse(time.RFC3339, op["created_at"].(*types.AttributeValueMemberS).Value); err != nil {
		t.Errorf("created_at not RFC 3339: %v", err)
	}
	tk := get("TICKET#" + coretest.TicketID(o))
	if _, has := tk["expires_at"]; has {
		t.Error("ticket has expires_at: tickets must outlive the window")
	}
	if v := tk["operation_key"].(*types.AttributeValueMemberS).Value; v != o.Key {
		t.Errorf("ticket operation_key = %s, want %s", v, o.Key)
	}
	if v := tk["arguments"].(*types.AttributeValueMemberS).Value; v != `{"title":"Cannot sign in"}` {
		t.Errorf("ticket arguments = %s", v)
	}
}

func attrType(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case nil:
		return "missing"
	}
	return "other"
}

// DynamoDB requests per callback, every HTTP request the SDK sends: 2 for
// a new operation and 2 for a repeat once the user cache is warm, the
// claim's TransactWriteItems and the strongly consistent GetItem of the
// operation sent beside it (the read-ahead); the first callback of a user
// pays the user's GetItem more, before the claim. The claim's two
// requests go out together and the callback answers once one of them
// settles it (the read for a repeat, the transaction for a new
// operation): one round trip waited for, not two. The request it did not
// wait for still runs to its end, so the counts are taken after
// store.Wait. They are deterministic, so they are asserted.
func TestRoundTripsPerCallback(t *testing.T) {
	r := newRoundTrips(t, testenv.DynamoDB(t), dynamo.Options{})
	steps := []roundTrip{
		{"new operation, cold user cache", "r1", core.KindCreated, 3},
		{"repeat, warm cache", "r1", core.KindDuplicate, 2},
		{"new operation, warm cache", "r2", core.KindCreated, 2},
		{"repeat of the second", "r2", core.KindDuplicate, 2},
	}
	for _, st := range steps {
		o, n := r.call(st.rid)
		t.Logf("%s: %d DynamoDB requests", st.name, n) // read back by make bench
		if o.Kind != st.want || n != st.wantCalls {
			t.Errorf("%s: kind %v with %d DynamoDB calls, want %v with %d", st.name, o.Kind, n, st.want, st.wantCalls)
		}
	}
}

// roundTrips is the callback's service over a store on a fresh table
// whose client counts its requests, with user-a (alice of tenant-a)
// stored; its ticket ids are unique within the table. The store reaches
// DynamoDB at endpoint: DynamoDB Local, or a proxy in front of it.
type roundTrips struct {
	store *dynamo.Store
	calls atomic.Int64
	seq   atomic.Int64
	svc   *core.Service
}

func newRoundTrips(t *testing.T, endpoint string, opt dynamo.Options) *roundTrips {
	t.Helper()
	table := testenv.CreateTable(t, endpoint)
	r := &roundTrips{}
	r.store = dynamo.New(testenv.DynamoClient(t, endpoint, testenv.CountCalls(&r.calls)), table, opt)
	if err := r.store.PutUser(context.Background(), core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	r.svc = &core.Service{Store: r.store, Users: usercache.New(r.store, time.Minute, 16), Policy: idem.PolicyArguments,
		Retention: time.Hour, NewID: func() string { return fmt.Sprintf("rt-%d-%d", time.Now().UnixNano(), r.seq.Add(1)) }}
	return r
}

// call answers user-a's create_ticket call with request id rid, and the
// DynamoDB requests it took, counted once the store has ended those it
// did not wait for (store.Wait).
func (r *roundTrips) call(rid string) (core.Outcome, int64) {
	before := r.calls.Load()
	o := r.svc.Answer(context.Background(), core.Call{Function: core.CreateTicket,
		Content: json.RawMessage(`{"title":"Round trips"}`), ExternalUserID: "user-a", RequestID: rid})
	r.store.Wait()
	return o, r.calls.Load() - before
}

// roundTrip is a step of a count: a call's request id, and the kind of
// outcome and the number of DynamoDB requests it must have.
type roundTrip struct {
	name      string
	rid       string
	want      core.Kind
	wantCalls int64
}

// Users: USER# items, disabled flag, unknown → not found.
func TestUsers(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	if err := s.PutUser(ctx, core.User{ExternalID: "user-d", TenantID: "tenant-a", UserID: "dave", Disabled: true}); err != nil {
		t.Fatal(err)
	}
	u, err := s.User(ctx, "user-d")
	if err != nil || !u.Disabled || u.TenantID != "tenant-a" {
		t.Fatalf("User = %+v, %v", u, err)
	}
	if _, err := s.User(ctx, "nobody"); err != core.ErrNotFound {
		t.Fatalf("unknown user: %v, want ErrNotFound", err)
	}
}

// TestPendingTicketID reads stream images of items as DynamoDB Local
// stores them (a stream's new image is the item in DynamoDB JSON): a
// ticket pending delivery gives its id; the same ticket once delivered,
// its operation item, a ticket without delivery, a removal and a user
// give none; an image that does not decode is an error.
func TestPendingTicketID(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	now := time.Now()
	create := func(key, id string, d *core.DeliveryStatus) {
		t.Helper()
		op := idem.Record{Key: key, State: idem.StateCompleted, Tenant: "tenant-a", Owner: "alice",
			Function: core.CreateTicket, Fingerprint: strings.Repeat("f", 64), Result: []byte(`{}`),
			CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		tk := core.Ticket{ID: id, TenantID: "tenant-a", UserID: "alice", OperationKey: key,
			Arguments: `{"title":"Printer"}`, CreatedAt: now, Delivery: d}
		if existing, err := s.Claims().Claim(ctx, op, core.Writes{Tickets: []core.Ticket{tk}}, now); err != nil || existing != nil {
			t.Fatalf("create %s: %v, %v", id, existing, err)
		}
	}
	image := func(pk string) []byte {
		t.Helper()
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table,
			Key: map[string]types.AttributeValue{dynamo.PartitionKey: &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Fatalf("GetItem %s: %v", pk, err)
		}
		b, err := attributevalue.MarshalMapJSON(out.Item)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pendingKey, plainKey := strings.Repeat("a", 64), strings.Repeat("b", 64)
	create(pendingKey, "t-pending", &core.DeliveryStatus{State: core.DeliveryPending, DueAt: now.Truncate(time.Second)})
	create(plainKey, "t-plain", nil)
	if err := s.PutUser(ctx, core.User{ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}); err != nil {
		t.Fatal(err)
	}
	pending := image("TICKET#t-pending")

	if id, ok, err := dynamo.PendingTicketID(pending); err != nil || !ok || id != "t-pending" {
		t.Fatalf("pending ticket %s: %q %v %v; want t-pending", pending, id, ok, err)
	}
	// Delivered: the same ticket, no longer pending.
	if _, err := s.Claim(ctx, "t-pending", "w", now.Add(time.Second), now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "t-pending", "w", delivery.Update{State: delivery.StateDelivered, Attempts: 1,
		ExternalID: "1", DeliveredAt: now}); err != nil {
		t.Fatal(err)
	}
	for name, img := range map[string][]byte{
		"delivered ticket":         image("TICKET#t-pending"),
		"ticket without delivery":  image("TICKET#t-plain"),
		"operation item":           image("OP#" + pendingKey),
		"user item":                image("USER#user-a"),
		"user item marked pending": []byte(`{"pk":{"S":"USER#x"},"delivery_state":{"S":"pending"}}`),
		"ticket without an id":     []byte(`{"pk":{"S":"TICKET#"},"delivery_state":{"S":"pending"}}`),
		"removal":                  nil,
		"null image":               []byte("null"),
	} {
		if id, ok, err := dynamo.PendingTicketID(img); err != nil || ok || id != "" {
			t.Errorf("%s %s: %q %v %v; want not pending, no error", name, img, id, ok, err)
		}
	}
	for name, img := range map[string][]byte{
		"not JSON":            []byte(`{"pk":`),
		"not DynamoDB":        []byte(`{"pk":"TICKET#t-1"}`),
		"pk of wrong type":    []byte(`{"pk":{"BOOL":true},"delivery_state":{"S":"pending"}}`),
		"state of wrong type": []byte(`{"pk":{"S":"TICKET#t-1"},"delivery_state":{"L":[]}}`),
	} {
		if id, ok, err := dynamo.PendingTicketID(img); err == nil || ok || id != "" {
			t.Errorf("%s %s: %q %v %v; want an error", name, img, id, ok, err)
		}
	}
}

// The follow-ups through the real service over the store: every answer,
// nothing written by a rejection, reads of one's own writes, comments
// racing closes.
func TestFollowUps(t *testing.T) {
	storetest.RunFollowUps(t, conformance)
}
