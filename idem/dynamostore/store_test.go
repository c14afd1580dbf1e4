package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
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
	o := g.Do(context.Background(), call("alice", "r1", `{"b":1,"a":"<&>"}`), func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
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
	o := g.Do(context.Background(), call("alice", "r1", `{}`), func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
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
	o := g.Do(context.Background(), call("alice", "r1", `{}`), func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
		return []byte(`{}`), writes, nil
	})
	if o.Status != idem.Failed || calls.Load() != 0 {
		t.Fatalf("%d writes: %v (%v) after %d requests, want failed before any", len(writes), o.Status, o.Err, calls.Load())
	}
	o = g.Do(context.Background(), call("alice", "r1", `{}`), func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
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
		o := g.Do(context.Background(), c, func(idem.Claim) ([]byte, []types.TransactWriteItem, error) { return []byte(`{}`), nil, nil })
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
			o := g.Do(context.Background(), call("alice", "r1", `{}`), func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
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
		func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
			return []byte(`{"order_id":"first"}`), nil, nil
		})
	if o.Status != idem.Failed || o.Result != nil {
		t.Fatalf("status %v, result %q (err %v); want Failed with no result", o.Status, o.Result, o.Err)
	}
}

// gated is a real client whose transaction and read can be ordered, so
// that which of the two answers a Claim is fixed, not left to timing.
type gated struct {
	*dynamodb.Client
	// hold, when set, keeps the transaction from being sent until it is
	// closed or the call's deadline passes (the call is then busy).
	hold chan struct{}
	// afterRead, when set, keeps the transaction from being sent until
	// the read has answered.
	afterRead bool
	// readAfterTx sends the read once the transaction has committed and
	// keeps the transaction's answer until the read has answered: the
	// read sees this call's own write.
	readAfterTx bool
	// onRead runs after the read, before it answers.
	onRead    func()
	readDone  chan struct{}
	txDone    chan struct{}
	gets, txs atomic.Int64
}

func newGated(c *dynamodb.Client) *gated {
	return &gated{Client: c, readDone: make(chan struct{}), txDone: make(chan struct{})}
}

func (g *gated) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	g.txs.Add(1)
	if g.hold != nil {
		select {
		case <-g.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if g.afterRead {
		<-g.readDone
	}
	out, err := g.Client.TransactWriteItems(ctx, in, opts...)
	if g.readAfterTx {
		close(g.txDone)
		<-g.readDone
	}
	return out, err
}

func (g *gated) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	g.gets.Add(1)
	if g.readAfterTx {
		<-g.txDone
	}
	out, err := g.Client.GetItem(ctx, in, opts...)
	if g.onRead != nil {
		g.onRead()
	}
	close(g.readDone)
	return out, err
}

// readAheadEnv is a table, a plain store to set records up with, and a
// gated read-ahead store under test, with a clock of the test's.
type readAheadEnv struct {
	client *dynamodb.Client
	name   string
	plain  *idem.Guard[[]types.TransactWriteItem]
	now    time.Time
}

func newReadAheadEnv(t *testing.T) *readAheadEnv {
	client, name := table(t)
	e := &readAheadEnv{client: client, name: name, now: time.Now().UTC().Truncate(time.Second)}
	e.plain = &idem.Guard[[]types.TransactWriteItem]{Store: dynamostore.New(client, name, dynamostore.Options{}),
		Retention: retention, Now: func() time.Time { return e.now }}
	return e
}

// guard is a read-ahead Guard over g. Its calls time out after two
// seconds: a claim that waits for a held transaction ends busy.
func (e *readAheadEnv) guard(g *gated, policy idem.Policy) *idem.Guard[[]types.TransactWriteItem] {
	return &idem.Guard[[]types.TransactWriteItem]{
		Store:  dynamostore.New(g, e.name, dynamostore.Options{ReadAhead: true, CallTimeout: 2 * time.Second}),
		Policy: policy, Retention: retention, Now: func() time.Time { return e.now },
	}
}

// order is the arguments of the calls the tests repeat.
const order = `{"sku":"A-1","qty":2}`

func do(g *idem.Guard[[]types.TransactWriteItem], c idem.Call, result string) idem.Outcome {
	return g.Do(context.Background(), c, func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
		return []byte(result), []types.TransactWriteItem{effectItem(result)}, nil
	})
}

// A live record found by the read answers while the transaction is held
// back: the repeat costs the latency of one read. Had the claim waited
// for the transaction, the held transaction would have made it busy.
func TestReadAheadAnswersFromTheRead(t *testing.T) {
	t.Run("completed: replayed byte for byte", func(t *testing.T) {
		e := newReadAheadEnv(t)
		first := do(e.plain, call("alice", "r1", order), `{"order_id":"first"}`)
		wantStatus(t, first, idem.Created)
		g := newGated(e.client)
		g.hold = make(chan struct{})
		o := do(e.guard(g, idem.PolicyArguments), call("alice", "r1", order), `{"order_id":"second"}`)
		close(g.hold)
		wantStatus(t, o, idem.Replayed)
		if string(o.Result) != `{"order_id":"first"}` {
			t.Fatalf("replayed %s", o.Result)
		}
	})
	t.Run("pending: in progress", func(t *testing.T) {
		e := newReadAheadEnv(t)
		c := call("alice", "r1", order)
		k, _ := idem.KeyOf(idem.PolicyArguments, c)
		if _, err := e.plain.Store.Claim(context.Background(), idem.Record{Key: k.ID, State: idem.StatePending, Tenant: c.Tenant,
			Owner: c.Owner, Function: c.Function, Fingerprint: k.Fingerprint, CreatedAt: e.now, ExpiresAt: e.now.Add(time.Hour)}, nil, e.now); err != nil {
			t.Fatal(err)
		}
		g := newGated(e.client)
		g.hold = make(chan struct{})
		o := do(e.guard(g, idem.PolicyArguments), c, `{"order_id":"x"}`)
		close(g.hold)
		wantStatus(t, o, idem.InProgress)
	})
	t.Run("another owner: conflict, nothing disclosed", func(t *testing.T) {
		e := newReadAheadEnv(t)
		wantStatus(t, do(e.plain, call("alice", "r1", order), `{"order_id":"first"}`), idem.Created)
		g := newGated(e.client)
		g.hold = make(chan struct{})
		o := do(e.guard(g, idem.PolicyArguments), call("carol", "r1", order), `{"order_id":"x"}`)
		close(g.hold)
		wantStatus(t, o, idem.Conflict)
		if o.Result != nil {
			t.Fatalf("disclosed %s", o.Result)
		}
	})
}

// What the read finds but may not answer: the transaction decides.
func TestReadAheadDefersToTheTransaction(t *testing.T) {
	t.Run("the call's own write, seen by the read: created, not replayed", func(t *testing.T) {
		e := newReadAheadEnv(t)
		g := newGated(e.client)
		g.readAfterTx = true
		o := do(e.guard(g, idem.PolicyArguments), call("alice", "r1", order), `{"order_id":"mine"}`)
		wantStatus(t, o, idem.Created)
		if string(o.Result) != `{"order_id":"mine"}` {
			t.Fatalf("result %s", o.Result)
		}
	})
	// A record of other arguments under the call's key may not be the
	// answer: the call's own operation may be held under the other
	// policy's key, which only the transaction checks.
	t.Run("policy request, other arguments: the transaction answers mismatch", func(t *testing.T) {
		e := newReadAheadEnv(t)
		e.plain.Policy = idem.PolicyRequest
		wantStatus(t, do(e.plain, call("alice", "r1", order), `{"order_id":"first"}`), idem.Created)
		g := newGated(e.client)
		g.afterRead = true
		o := do(e.guard(g, idem.PolicyRequest), call("alice", "r1", `{"sku":"B-2"}`), `{"order_id":"x"}`)
		wantStatus(t, o, idem.Mismatch)
	})
	t.Run("policy request, other arguments, whose operation a switch left under the other key: the transaction replays it", func(t *testing.T) {
		e := newReadAheadEnv(t)
		second := do(e.plain, call("alice", "r1", `{"sku":"B-2"}`), `{"order_id":"second"}`) // under arguments
		wantStatus(t, second, idem.Created)
		e.plain.Policy = idem.PolicyRequest
		wantStatus(t, do(e.plain, call("alice", "r1", order), `{"order_id":"first"}`), idem.Created)
		g := newGated(e.client)
		g.afterRead = true // the read, which finds the request key's record of other arguments, comes first
		o := do(e.guard(g, idem.PolicyRequest), call("alice", "r1", `{"sku":"B-2"}`), `{"order_id":"x"}`)
		wantStatus(t, o, idem.Replayed)
		if string(o.Result) != `{"order_id":"second"}` {
			t.Fatalf("replayed %s, want the operation of these arguments", o.Result)
		}
	})
	t.Run("expired but present: absent to the read, the transaction reclaims", func(t *testing.T) {
		e := newReadAheadEnv(t)
		wantStatus(t, do(e.plain, call("alice", "r1", order), `{"order_id":"old"}`), idem.Created)
		e.now = e.now.Add(retention + time.Second)
		g := newGated(e.client)
		g.afterRead = true
		o := do(e.guard(g, idem.PolicyArguments), call("alice", "r1", order), `{"order_id":"new"}`)
		wantStatus(t, o, idem.Created)
		if n := countItems(t, e.client, e.name, "EFFECT#"); n != 2 {
			t.Fatalf("effects = %d, want 2", n)
		}
	})
	t.Run("about to expire: TTL deletes it after the read, the transaction creates", func(t *testing.T) {
		e := newReadAheadEnv(t)
		wantStatus(t, do(e.plain, call("alice", "r1", order), `{"order_id":"old"}`), idem.Created)
		e.now = e.now.Add(retention - 30*time.Second) // live, inside the margin
		c := call("alice", "r1", order)
		k, _ := idem.KeyOf(idem.PolicyArguments, c)
		g := newGated(e.client)
		g.afterRead = true
		g.onRead = func() { // TTL's deletion, between the read and the transaction
			if _, err := e.client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &e.name,
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "OP#" + k.ID}}}); err != nil {
				t.Error(err)
			}
		}
		o := do(e.guard(g, idem.PolicyArguments), c, `{"order_id":"new"}`)
		wantStatus(t, o, idem.Created) // the read's replay would have hidden a committed effect
		if n := countItems(t, e.client, e.name, "EFFECT#"); n != 2 {
			t.Fatalf("effects = %d, want 2", n)
		}
	})
}

// Requests per claim with ReadAhead: one transaction and one read, for a
// new operation and for a repeat alike; without it, the transaction only.
func TestReadAheadRequests(t *testing.T) {
	e := newReadAheadEnv(t)
	for _, readAhead := range []bool{false, true} {
		g := newGated(e.client)
		store := dynamostore.New(countingOnly{g}, e.name, dynamostore.Options{ReadAhead: readAhead})
		guard := &idem.Guard[[]types.TransactWriteItem]{Store: store, Retention: time.Hour}
		rid := "r-" + map[bool]string{false: "plain", true: "ahead"}[readAhead]
		for i, want := range []idem.Status{idem.Created, idem.Replayed} {
			before := g.txs.Load() + g.gets.Load()
			o := do(guard, call("alice", rid, `{}`), `{"order_id":"`+rid+`"}`)
			wantStatus(t, o, want)
			// A repeat the read answered returns once its transaction is
			// handed to the client, before the client has counted it.
			store.Wait()
			wantReqs := int64(1)
			if readAhead {
				wantReqs = 2
			}
			if got := g.txs.Load() + g.gets.Load() - before; got != wantReqs {
				t.Errorf("read ahead %v, call %d: %d requests, want %d", readAhead, i+1, got, wantReqs)
			}
		}
	}
}

// countingOnly counts a gated client's requests without ordering them.
type countingOnly struct{ g *gated }

func (c countingOnly) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.g.txs.Add(1)
	return c.g.Client.TransactWriteItems(ctx, in, opts...)
}

func (c countingOnly) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.g.gets.Add(1)
	return c.g.Client.GetItem(ctx, in, opts...)
}

// The read-ahead rule on its own, case by case: a read answers only for
// a live record other than the call's own, expiring past the margin.
func TestReadAheadRule(t *testing.T) {
	s := dynamostore.New(nil, "table", dynamostore.Options{ReadAhead: true, ReadAheadMargin: time.Minute})
	now := time.Date(2026, 5, 1, 9, 30, 0, 250, time.UTC)
	mine := idem.Record{Key: "k", State: idem.StateCompleted, Tenant: "t", Owner: "o", Function: "f", Fingerprint: "fp",
		Result: []byte(`{"id":"mine"}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour).Truncate(time.Second)}
	stored := func(change func(*idem.Record)) idem.Record {
		r := mine
		r.CreatedAt = r.CreatedAt.Truncate(time.Second) // stored in whole seconds
		change(&r)
		return r
	}
	for _, tc := range []struct {
		name  string
		found idem.Record
		want  bool
	}{
		{"the call's own record", stored(func(*idem.Record) {}), false},
		{"another call's result", stored(func(r *idem.Record) { r.Result = []byte(`{"id":"other"}`) }), true},
		{"another call's result, same bytes, an earlier second", stored(func(r *idem.Record) { r.CreatedAt = r.CreatedAt.Add(-time.Second) }), true},
		{"pending", stored(func(r *idem.Record) { r.State, r.Result = idem.StatePending, nil }), true},
		{"another owner", stored(func(r *idem.Record) { r.Owner = "other" }), true},
		{"expired", stored(func(r *idem.Record) { r.ExpiresAt = now.Add(-time.Second).Truncate(time.Second) }), false},
		{"expiring inside the margin", stored(func(r *idem.Record) { r.ExpiresAt = now.Add(59 * time.Second).Truncate(time.Second) }), false},
		{"expiring just past the margin", stored(func(r *idem.Record) { r.ExpiresAt = now.Add(61 * time.Second).Truncate(time.Second) }), true},
	} {
		if got := s.Decides(tc.found, mine, now); got != tc.want {
			t.Errorf("%s: decides %v, want %v", tc.name, got, tc.want)
		}
	}
	// With an AltKey, a record of other arguments (or another tenant) is
	// left to the transaction, which also checks the other policy's key.
	withAlt := mine
	withAlt.AltKey = "alt"
	for name, found := range map[string]idem.Record{
		"other arguments": stored(func(r *idem.Record) { r.Fingerprint = "other" }),
		"another tenant":  stored(func(r *idem.Record) { r.Tenant = "other" }),
	} {
		if s.Decides(found, withAlt, now) {
			t.Errorf("%s, the call naming an AltKey: decides true, want false", name)
		}
		if !s.Decides(found, mine, now) {
			t.Errorf("%s, the call naming no AltKey: decides false, want true", name)
		}
	}
	if !s.Decides(stored(func(r *idem.Record) { r.Owner = "other" }), withAlt, now) {
		t.Error("another owner, the call naming an AltKey: decides false, want true")
	}
	// A caller's expiry with a fraction of a second is stored to the
	// second: the read of its own record is still its own, not a repeat.
	fractional := mine
	fractional.ExpiresAt = now.Add(time.Hour)
	if s.Decides(stored(func(*idem.Record) {}), fractional, now) {
		t.Error("the call's own record, its expiry given with a fraction of a second: decides true, want false")
	}
}

// held holds every transaction until released, then answers it with a
// cancellation for code, noting that it returned and whether the context
// it was given had ended meanwhile; its reads go to DynamoDB Local.
type held struct {
	*dynamodb.Client
	code     string
	release  chan struct{}
	txs      atomic.Int64
	returned atomic.Bool
	ended    atomic.Bool
}

func (c *held) TransactWriteItems(ctx context.Context, _ *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.txs.Add(1)
	<-c.release
	c.ended.Store(ctx.Err() != nil)
	c.returned.Store(true)
	return nil, &types.TransactionCanceledException{Message: aws.String("held"),
		CancellationReasons: []types.CancellationReason{{Code: aws.String(c.code)}}}
}

// repeatOverHeld stores a first order with the plain store and gives a
// read-ahead store with opt (ReadAhead set) over a held client answering
// code, and a Guard of it, for the order's repeat.
func (e *readAheadEnv) repeatOverHeld(t *testing.T, code string, opt dynamostore.Options) (*held, *dynamostore.Store, *idem.Guard[[]types.TransactWriteItem]) {
	t.Helper()
	wantStatus(t, do(e.plain, call("alice", "r1", order), `{"order_id":"first"}`), idem.Created)
	c := &held{Client: e.client, code: code, release: make(chan struct{})}
	opt.ReadAhead = true
	store := dynamostore.New(c, e.name, opt)
	return c, store, &idem.Guard[[]types.TransactWriteItem]{Store: store, Retention: retention, Now: func() time.Time { return e.now }}
}

// A transaction the read answered ahead of is left to end on its own, not
// waited for by the claim: Wait waits for it, and its conflict is not
// retried, since nobody waits for its answer (with retries, 11 attempts).
func TestReadAheadLeavesTheTransaction(t *testing.T) {
	c, store, g := newReadAheadEnv(t).repeatOverHeld(t, "TransactionConflict", dynamostore.Options{ConflictRetries: 10,
		ConflictBackoff: time.Millisecond, ConflictBackoffMax: time.Millisecond})
	o := do(g, call("alice", "r1", order), `{"order_id":"second"}`)
	wantStatus(t, o, idem.Replayed)
	if c.returned.Load() {
		t.Fatal("the transaction returned before its release: the claim waited for it")
	}
	close(c.release)
	store.Wait()
	if !c.returned.Load() {
		t.Fatal("Wait returned before the transaction ended")
	}
	if n := c.txs.Load(); n != 1 {
		t.Fatalf("transaction attempts = %d, want 1: the answered claim's conflict was retried", n)
	}
}

// A caller that stops waiting as soon as the read has answered (a door
// that cancels its request's context on return) does not take the
// transaction down with it: the transaction is sent on a context that
// the caller's cancellation does not end, so a claim always sends both
// requests and a count taken after Wait is exact.
func TestReadAheadTransactionOutlivesTheCaller(t *testing.T) {
	c, store, g := newReadAheadEnv(t).repeatOverHeld(t, "ConditionalCheckFailed", dynamostore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	o := g.Do(ctx, call("alice", "r1", order), func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
		return []byte(`{"order_id":"second"}`), []types.TransactWriteItem{effectItem(`{"order_id":"second"}`)}, nil
	})
	cancel()
	close(c.release)
	store.Wait()
	wantStatus(t, o, idem.Replayed)
	if c.ended.Load() {
		t.Fatal("the transaction's context ended with the caller's: the SDK would drop a request not yet sent")
	}
}

// A caller whose context has already ended sends nothing and is busy.
func TestReadAheadCancelledBeforeStartSendsNothing(t *testing.T) {
	e := newReadAheadEnv(t)
	g := newGated(e.client)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := e.guard(g, idem.PolicyArguments).Do(ctx, call("alice", "r1", `{"sku":"A-1"}`), func(idem.Claim) ([]byte, []types.TransactWriteItem, error) {
		return []byte(`{}`), nil, nil
	})
	wantStatus(t, o, idem.Busy)
	if n := g.gets.Load() + g.txs.Load(); n != 0 {
		t.Fatalf("%d requests sent for a caller that had gone", n)
	}
}

// failingRead is a real client whose read-ahead fails with err.
type failingRead struct {
	*dynamodb.Client
	err error
}

func (f failingRead) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, f.err
}

// A read-ahead that fails is no answer: the transaction answers, a new
// call created and its repeat replayed, and the failure goes to
// Options.OnReadAheadError, once per claim, with the read's error in its
// chain.
func TestReadAheadErrorIsReported(t *testing.T) {
	e := newReadAheadEnv(t)
	denied := errors.New("injected: the read is denied")
	var mu sync.Mutex
	var got []error
	s := dynamostore.New(failingRead{e.client, denied}, e.name, dynamostore.Options{ReadAhead: true,
		OnReadAheadError: func(ctx context.Context, err error) {
			if ctx == nil {
				t.Error("OnReadAheadError without a context")
			}
			mu.Lock()
			got = append(got, err)
			mu.Unlock()
		}})
	g := &idem.Guard[[]types.TransactWriteItem]{Store: s, Retention: retention, Now: func() time.Time { return e.now }}
	c := call("alice", "r1", order)
	wantStatus(t, do(g, c, `{"order_id":"first"}`), idem.Created)
	o := do(g, c, `{"order_id":"second"}`)
	wantStatus(t, o, idem.Replayed)
	if string(o.Result) != `{"order_id":"first"}` {
		t.Errorf("replayed %s, want the first result", o.Result)
	}
	s.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("OnReadAheadError called %d times for two claims whose reads failed, want 2", len(got))
	}
	for _, err := range got {
		if !errors.Is(err, denied) {
			t.Errorf("OnReadAheadError got %v, which does not carry the read's error", err)
		}
	}
}
