package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
	"github.com/aivax-examples/idempotent-callback/idem/idemtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) {
	// The runnable examples need DynamoDB Local too, and take no
	// testing.TB: they read its endpoint from the environment.
	if os.Getenv(testenv.EnvDynamoDBEndpoint) == "" {
		ep, err := testenv.DynamoDBEndpoint()
		if err != nil {
			fmt.Fprintln(os.Stderr, "dynamostore tests need DynamoDB Local (make tools):", err)
			os.Exit(1)
		}
		_ = os.Setenv(testenv.EnvDynamoDBEndpoint, ep)
	}
	testenv.Main(m)
}

// table is a fresh table on DynamoDB Local and a client of it.
func table(t *testing.T, opts ...func(*dynamodb.Options)) (*dynamodb.Client, string) {
	t.Helper()
	endpoint := testenv.DynamoDB(t)
	return testenv.DynamoClient(t, endpoint, opts...), testenv.CreateTable(t, endpoint)
}

func effectItem(id string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "EFFECT#" + id}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}
}

// fixture is the suite's Fixture over store, with effects as EFFECT#
// items of the same table; the store's client is cc.
func fixture(client *dynamodb.Client, tableName string, store *dynamostore.Store, cc *cancelling, reopen func(t *testing.T) idem.Store[[]types.TransactWriteItem]) idemtest.Fixture[[]types.TransactWriteItem] {
	return idemtest.Fixture[[]types.TransactWriteItem]{
		Store:  store,
		Cancel: cc.items,
		Write:  func(id string) []types.TransactWriteItem { return []types.TransactWriteItem{effectItem(id)} },
		// An effect, then a condition check on an item that does not
		// exist: the transaction is cancelled, the effect not written.
		Refuse: func() []types.TransactWriteItem {
			return []types.TransactWriteItem{effectItem("refused"), {ConditionCheck: &types.ConditionCheck{
				Key:                 map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "STOCK#none"}},
				ConditionExpression: aws.String("attribute_exists(pk)"),
			}}}
		},
		Effects: func(t *testing.T) int { return countItems(t, client, tableName, "EFFECT#") },
		Reopen:  reopen,
	}
}

func countItems(t *testing.T, client *dynamodb.Client, tableName, prefix string) int {
	t.Helper()
	n := 0
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{
		TableName:                 &tableName,
		FilterExpression:          aws.String("begins_with(pk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}},
		Select:                    types.SelectCount,
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += int(page.Count)
	}
	return n
}

func TestConformance(t *testing.T) {
	for _, readAhead := range []bool{false, true} {
		t.Run(fmt.Sprintf("read ahead %v", readAhead), func(t *testing.T) {
			opt := dynamostore.Options{ReadAhead: readAhead}
			idemtest.Run(t, func(t *testing.T, _ func() time.Time) idemtest.Fixture[[]types.TransactWriteItem] {
				// The store reads no clock of its own: every time comes with the call.
				client, name := table(t)
				cc := &cancelling{Client: client}
				return fixture(client, name, dynamostore.New(cc, name, opt), cc, func(t *testing.T) idem.Store[[]types.TransactWriteItem] {
					return dynamostore.New(testenv.DynamoClient(t, testenv.DynamoDB(t)), name, opt) // a new client: a restart
				})
			})
		})
	}
}

// The record's item has the attributes, names and types of the
// defaults, and the caller's item is in the same table.
func TestStoredItem(t *testing.T) {
	client, name := table(t)
	store := dynamostore.New(client, name, dynamostore.Options{})
	now := time.Date(2026, 3, 1, 12, 0, 0, 500, time.UTC)
	g := &idem.Guard[[]types.TransactWriteItem]{Store: store, Retention: time.Hour, Now: func() time.Time { return now }}
	o := g.Do(context.Background(), call("alice", "r1", `{"b":1,"a":"<&>"}`), func(idem.OpKey) ([]byte, []types.TransactWriteItem, error) {
		return []byte(`{"order_id":"o-1"}`), []types.TransactWriteItem{effectItem("o-1")}, nil
	})
	wantStatus(t, o, idem.Created)
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &name, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "OP#" + o.Key}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"pk": "OP#" + o.Key, "state": "completed", "tenant_id": "tenant-a", "user_id": "alice", "function": "create_order",
		"result": `{"order_id":"o-1"}`, "created_at": "2026-03-01T12:00:00Z",
	}
	for attr, v := range want {
		s, ok := out.Item[attr].(*types.AttributeValueMemberS)
		if !ok || s.Value != v {
			t.Errorf("%s = %#v, want the string %q", attr, out.Item[attr], v)
		}
	}
	if n, ok := out.Item["expires_at"].(*types.AttributeValueMemberN); !ok || n.Value != fmt.Sprint(now.Add(time.Hour).Unix()) {
		t.Errorf("expires_at = %#v, want the number %d", out.Item["expires_at"], now.Add(time.Hour).Unix())
	}
	if fp, ok := out.Item["fingerprint"].(*types.AttributeValueMemberS); !ok || len(fp.Value) != 64 {
		t.Errorf("fingerprint = %#v", out.Item["fingerprint"])
	}
	if len(out.Item) != 9 {
		t.Errorf("item has %d attributes, want 9: %v", len(out.Item), out.Item)
	}
	if n := countItems(t, client, name, "EFFECT#"); n != 1 {
		t.Errorf("effects = %d, want 1", n)
	}
}

// Attribute names and the prefix are the caller's: a store with other
// names writes and reads them, and a second store with the defaults on
// the same table does not see its records.
func TestAttributeNames(t *testing.T) {
	client, name := table(t)
	attr := dynamostore.DefaultAttributes
	attr.Prefix, attr.State, attr.Result = "IDEM#orders#", "st", "res"
	custom := dynamostore.New(client, name, dynamostore.Options{Attributes: &attr})
	g := &idem.Guard[[]types.TransactWriteItem]{Store: custom, Retention: time.Hour}
	o := g.Do(context.Background(), call("alice", "r1", `{}`), func(idem.OpKey) ([]byte, []types.TransactWriteItem, error) {
		return []byte(`{"ok":true}`), nil, nil
	})
	wantStatus(t, o, idem.Created)
	rec, err := custom.Get(context.Background(), o.Key)
	if err != nil || rec == nil || rec.State != idem.StateCompleted || string(rec.Result) != `{"ok":true}` {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
	if n := countItems(t, client, name, "IDEM#orders#"); n != 1 {
		t.Fatalf("records under the custom prefix = %d, want 1", n)
	}
	if rec, err := dynamostore.New(client, name, dynamostore.Options{}).Get(context.Background(), o.Key); rec != nil || err != nil {
		t.Fatalf("the default prefix sees %+v, %v", rec, err)
	}
}

// More writes than one transaction takes are refused before any request.
func TestTooManyWrites(t *testing.T) {
	var calls atomic.Int64
	client, name := table(t, testenv.CountCalls(&calls))
	store := dynamostore.New(client, name, dynamostore.Options{})
	writes := make([]types.TransactWriteItem, dynamostore.MaxWrites+1)
	for i := range writes {
		writes[i] = effectItem(fmt.Sprint(i))
	}
	g := &idem.Guard[[]types.TransactWriteItem]{Store: store, Retention: time.Hour}
	o := g.Do(context.Background(), call("alice", "r1", `{}`), func(idem.OpKey) ([]byte, []types.TransactWriteItem, error) {
		return []byte(`{}`), writes, nil
	})
	if o.Status != idem.Failed || calls.Load() != 0 {
		t.Fatalf("%d writes: %v (%v) after %d requests, want failed before any", len(writes), o.Status, o.Err, calls.Load())
	}
	o = g.Do(context.Background(), call("alice", "r1", `{}`), func(idem.OpKey) ([]byte, []types.TransactWriteItem, error) {
		return []byte(`{}`), writes[:dynamostore.MaxWrites], nil
	})
	wantStatus(t, o, idem.Created)
	if n := countItems(t, client, name, "EFFECT#"); n != dynamostore.MaxWrites {
		t.Fatalf("effects = %d, want %d", n, dynamostore.MaxWrites)
	}
}

// A stored item that is not a whole record (here: completed, with the
// caller's tenant, owner and a result, but no fingerprint or created_at)
// is an error on the path of the failed condition's returned item and on
// the read's, never a replay.
func TestUnreadableRecordIsNeverReplayed(t *testing.T) {
	client, name := table(t)
	c := call("alice", "r1", `{}`)
	k, err := idem.KeyOf(idem.PolicyArguments, c)
	if err != nil {
		t.Fatal(err)
	}
	item := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "OP#" + k.ID}, "tenant_id": &types.AttributeValueMemberS{Value: "tenant-a"},
		"state": &types.AttributeValueMemberS{Value: "completed"}, "function": &types.AttributeValueMemberS{Value: c.Function},
		"user_id": &types.AttributeValueMemberS{Value: "alice"}, "result": &types.AttributeValueMemberS{Value: `{"x":1}`},
		"expires_at": &types.AttributeValueMemberN{Value: fmt.Sprint(time.Now().Add(time.Hour).Unix())},
	}
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &name, Item: item}); err != nil {
		t.Fatal(err)
	}
	for _, readAhead := range []bool{false, true} {
		g := &idem.Guard[[]types.TransactWriteItem]{Store: dynamostore.New(client, name, dynamostore.Options{ReadAhead: readAhead}), Retention: time.Hour}
		o := g.Do(context.Background(), c, func(idem.OpKey) ([]byte, []types.TransactWriteItem, error) { return []byte(`{}`), nil, nil })
		if o.Status != idem.Failed || o.Result != nil {
			t.Fatalf("read ahead %v: %v %s (%v), want failed", readAhead, o.Status, o.Result, o.Err)
		}
	}
}

// A result DynamoDB cannot keep byte for byte (not UTF-8: the attribute
// is a string) is failed before any request; one over DynamoDB's 400 KB
// item limit is failed by DynamoDB. Either way nothing is written: no
// record holds the key and the caller's item is not there.
func TestResultDynamoDBCannotKeep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		result   []byte
		requests int64
	}{
		{"not UTF-8", []byte("\xff a \xfe"), 0},
		{"over 400 KB", []byte(`"` + strings.Repeat("x", 400*1024) + `"`), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			client, name := table(t, testenv.CountCalls(&calls))
			g := &idem.Guard[[]types.TransactWriteItem]{Store: dynamostore.New(client, name, dynamostore.Options{}), Retention: time.Hour}
			o := g.Do(context.Background(), call("alice", "r1", `{}`), func(idem.OpKey) ([]byte, []types.TransactWriteItem, error) {
				return tc.result, []types.TransactWriteItem{effectItem("o-1")}, nil
			})
			if o.Status != idem.Failed || calls.Load() != tc.requests {
				t.Fatalf("%v (%v) after %d requests, want failed after %d", o.Status, o.Err, calls.Load(), tc.requests)
			}
			out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &name, ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "OP#" + o.Key}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Item) != 0 || countItems(t, client, name, "EFFECT#") != 0 {
				t.Fatalf("written: the record %v, %d effects", out.Item, countItems(t, client, name, "EFFECT#"))
			}
		})
	}
}

// The check of the other policy's key is the store's own item: a refused
// write of the caller's is named by its index among the caller's writes,
// with the check in the transaction (Guard's claims) or without it.
func TestRefusedIndexCountsTheCallersWritesOnly(t *testing.T) {
	client, name := table(t)
	store := dynamostore.New(client, name, dynamostore.Options{})
	refuse := []types.TransactWriteItem{effectItem("o-1"), {ConditionCheck: &types.ConditionCheck{
		Key:                 map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "STOCK#none"}},
		ConditionExpression: aws.String("attribute_exists(pk)"),
	}}}
	c := call("alice", "r1", `{}`)
	k, err := idem.KeyOf(idem.PolicyArguments, c)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, alt := range []string{k.AltID, ""} {
		rec := idem.Record{Key: k.ID, AltKey: alt, State: idem.StateCompleted, Tenant: c.Tenant, Owner: c.Owner,
			Function: c.Function, Fingerprint: k.Fingerprint, Result: []byte(`{}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
		held, err := store.Claim(context.Background(), rec, refuse, now)
		var refused *idem.RefusedError
		if held != nil || !errors.As(err, &refused) || refused.Index != 1 {
			t.Fatalf("AltKey %q: held %v, err %v; want a RefusedError of write 1", alt, held, err)
		}
	}
	if n := countItems(t, client, name, ""); n != 0 {
		t.Fatalf("%d items written by refused claims", n)
	}
}

// itemlessCancel answers every transaction as DynamoDB does when the
// claim's condition failed but the request did not ask for the item
// back: a cancellation whose reason carries no Item.
type itemlessCancel struct{ dynamostore.Client }

func (itemlessCancel) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	failed, none := string(types.BatchStatementErrorCodeEnumConditionalCheckFailed), "None"
	return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"),
		CancellationReasons: []types.CancellationReason{{Code: &failed}, {Code: &none}, {Code: &none}}}
}

// A failed claim whose holder DynamoDB did not return is Failed: nothing
// was written, so it is never answered Created with the plan's result.
func TestClaimHeldWithoutItemIsFailed(t *testing.T) {
	s := dynamostore.New(itemlessCancel{}, "table", dynamostore.Options{})
	now := time.Now()
	g := &idem.Guard[[]types.TransactWriteItem]{Store: s, Retention: retention, Now: func() time.Time { return now }}
	o := g.Do(context.Background(), call("alice", "r1", `{"sku":"A-1"}`),
		func(idem.OpKey) ([]byte, []types.TransactWriteItem, error) {
			return []byte(`{"order_id":"first"}`), nil, nil
		})
	if o.Status != idem.Failed || o.Result != nil {
		t.Fatalf("status %v, result %q (err %v); want Failed with no result", o.Status, o.Result, o.Err)
	}
}
