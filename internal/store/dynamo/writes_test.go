package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
)

// opSeq numbers the operation keys of the claims these tests make.
var opSeq atomic.Int64

// claimWrites claims a fresh operation key with w at now and returns the
// claim's error (a held record is a test failure, as every key is new;
// reported with t.Errorf, as racing goroutines call it).
func claimWrites(ctx context.Context, t *testing.T, s *dynamo.Store, w core.Writes, now time.Time) error {
	t.Helper()
	key := fmt.Sprintf("%064x", opSeq.Add(1)+now.UnixNano())
	op := idem.Record{Key: key, State: idem.StateCompleted, Tenant: "tenant-a", Owner: "alice",
		Function: "add_comment", Fingerprint: strings.Repeat("f", 64), Result: []byte(`{}`),
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	held, err := s.Claims().Claim(ctx, op, w, now)
	if held != nil {
		t.Errorf("claim %s: held by %+v", key, held)
		return errors.New("held")
	}
	return err
}

// newTicket creates ticket id (tenant-a, alice) pending delivery due at
// now, through a claim.
func newTicket(t *testing.T, s *dynamo.Store, id string, now time.Time) {
	t.Helper()
	tk := core.Ticket{ID: id, TenantID: "tenant-a", UserID: "alice", OperationKey: strings.Repeat("c", 64),
		Arguments: `{"title":"Printer"}`, CreatedAt: now,
		Delivery: &core.DeliveryStatus{State: core.DeliveryPending, DueAt: now.Truncate(time.Second)}}
	if err := claimWrites(context.Background(), t, s, core.Writes{Tickets: []core.Ticket{tk}}, now); err != nil {
		t.Fatalf("create ticket %s: %v", id, err)
	}
}

// rawItem reads the item of pk as it is stored, nil when absent.
func (s tableStore) rawItem(t *testing.T, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := s.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &s.table,
		Key: map[string]types.AttributeValue{dynamo.PartitionKey: &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem %s: %v", pk, err)
	}
	return out.Item
}

// TestItemConditions makes each kind of write with each condition holding
// and failing: a write whose condition holds commits with the claim; one
// that fails refuses the whole claim (nothing of it written, the key not
// claimed), and core.Writes.Refused names it.
func TestItemConditions(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	now := time.Now()
	newTicket(t, s.Store, "t1", now)
	tk := core.TicketKey("t1")
	// The ticket's state for the conditions: a status, a list of two, a
	// number and a flag.
	if err := claimWrites(ctx, t, s.Store, core.Writes{Items: []core.ItemWrite{{Op: core.Update, Key: tk,
		Set: core.Item{"status": "open", "n": int64(7), "flag": true, "pair": []string{"a", "b"}}}}}, now); err != nil {
		t.Fatal(err)
	}
	put := func(key string) core.ItemWrite {
		return core.ItemWrite{Op: core.PutNew, Key: key, Set: core.Item{"body": "x"}}
	}
	update := func(key string, cs ...core.Cond) core.ItemWrite {
		return core.ItemWrite{Op: core.Update, Key: key, Set: core.Item{"touched": true}, If: cs}
	}
	check := func(key string, cs ...core.Cond) core.ItemWrite {
		return core.ItemWrite{Op: core.Check, Key: key, If: cs}
	}
	exists := core.Cond{Op: core.Exists}
	cases := []struct {
		name  string
		write core.ItemWrite
		holds bool
	}{
		{"put new", put("NOTE#new-1"), true},
		{"put on an existing key", put(tk), false},
		{"update, exists", update(tk, exists), true},
		{"update, exists, absent item", update("NOTE#absent-1", exists), false},
		{"update, equals string", update(tk, core.Cond{Op: core.Equals, Attr: "tenant_id", Value: "tenant-a"}), true},
		{"update, equals another string", update(tk, core.Cond{Op: core.Equals, Attr: "tenant_id", Value: "tenant-b"}), false},
		{"update, equals int64", update(tk, core.Cond{Op: core.Equals, Attr: "n", Value: int64(7)}), true},
		{"update, equals another int64", update(tk, core.Cond{Op: core.Equals, Attr: "n", Value: int64(8)}), false},
		{"update, equals bool", update(tk, core.Cond{Op: core.Equals, Attr: "flag", Value: true}), true},
		{"update, equals another bool", update(tk, core.Cond{Op: core.Equals, Attr: "flag", Value: false}), false},
		{"update, equals an absent attribute", update(tk, core.Cond{Op: core.Equals, Attr: "nothing", Value: "x"}), false},
		{"update, equals on an absent item", update("NOTE#absent-2", core.Cond{Op: core.Equals, Attr: "a", Value: "x"}), false},
		{"update, equals or absent, equal", update(tk, core.Cond{Op: core.EqualsOrAbsent, Attr: "status", Value: "open"}), true},
		{"update, equals or absent, absent", update(tk, core.Cond{Op: core.EqualsOrAbsent, Attr: "nothing", Value: "open"}), true},
		{"update, equals or absent, absent item", update("NOTE#absent-3", core.Cond{Op: core.EqualsOrAbsent, Attr: "s", Value: "open"}), true},
		{"update, equals or absent, another value", update(tk, core.Cond{Op: core.EqualsOrAbsent, Attr: "status", Value: "closed"}), false},
		{"update, size below, shorter", update(tk, core.Cond{Op: core.SizeBelow, Attr: "pair", Value: 3}), true},
		{"update, size below, as long", update(tk, core.Cond{Op: core.SizeBelow, Attr: "pair", Value: 2}), false},
		{"update, size below, absent list", update(tk, core.Cond{Op: core.SizeBelow, Attr: "nothing", Value: 1}), true},
		{"update, all of several", update(tk, exists, core.Cond{Op: core.Equals, Attr: "tenant_id", Value: "tenant-a"},
			core.Cond{Op: core.SizeBelow, Attr: "pair", Value: 3}), true},
		{"update, one of several fails", update(tk, exists, core.Cond{Op: core.Equals, Attr: "tenant_id", Value: "tenant-a"},
			core.Cond{Op: core.SizeBelow, Attr: "pair", Value: 2}), false},
		{"check, exists", check(tk, exists), true},
		{"check, exists, absent item", check("NOTE#absent-4", exists), false},
		{"check, equals", check(tk, core.Cond{Op: core.Equals, Attr: "user_id", Value: "alice"}), true},
		{"check, equals another", check(tk, core.Cond{Op: core.Equals, Attr: "user_id", Value: "bob"}), false},
		{"check without conditions", check("NOTE#absent-5"), true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A new ticket, a put before and the write under test: the
			// write is Items[1], the transaction's item 2 of the caller's.
			marker := fmt.Sprintf("NOTE#marker-%d", i)
			ticket := core.Ticket{ID: fmt.Sprintf("t-case-%d", i), TenantID: "tenant-a", UserID: "alice",
				OperationKey: strings.Repeat("d", 64), Arguments: `{"title":"x"}`, CreatedAt: now}
			w := core.Writes{Tickets: []core.Ticket{ticket}, Items: []core.ItemWrite{put(marker), c.write}}
			before := s.rawItem(t, c.write.Key)
			err := claimWrites(ctx, t, s.Store, w, now)
			if c.holds {
				if err != nil {
					t.Fatalf("claim: %v", err)
				}
				if s.rawItem(t, marker) == nil || s.rawItem(t, "TICKET#"+ticket.ID) == nil {
					t.Error("the claim's other writes are missing")
				}
				return
			}
			var r *idem.RefusedError
			if !errors.As(err, &r) || r.Index != 2 || w.Refused(err) != 1 {
				t.Fatalf("claim: %v (refused write %d), want a RefusedError at 2, Refused 1", err, w.Refused(err))
			}
			if s.rawItem(t, marker) != nil || s.rawItem(t, "TICKET#"+ticket.ID) != nil {
				t.Error("a refused claim wrote its other items")
			}
			if after := s.rawItem(t, c.write.Key); !reflect.DeepEqual(before, after) {
				t.Errorf("a refused claim changed %s:\n%v\n%v", c.write.Key, before, after)
			}
		})
	}
}

// TestItemWritesRefusedBeforeAnyRequest: writes the store cannot make
// faithfully are an error, not a refusal, and nothing is written.
func TestItemWritesRefusedBeforeAnyRequest(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	now := time.Now()
	newTicket(t, s.Store, "t1", now)
	many := make([]core.ItemWrite, dynamostore.MaxWrites+1)
	for i := range many {
		many[i] = core.ItemWrite{Op: core.PutNew, Key: fmt.Sprintf("NOTE#%d", i), Set: core.Item{"n": int64(i)}}
	}
	for name, w := range map[string]core.Writes{
		"a store attribute":       {Items: []core.ItemWrite{{Op: core.Update, Key: "TICKET#t1", Set: core.Item{"delivery_state": "delivered"}}}},
		"the key":                 {Items: []core.ItemWrite{{Op: core.PutNew, Key: "NOTE#1", Set: core.Item{"pk": "NOTE#2"}}}},
		"a ticket's typed field":  {Items: []core.ItemWrite{{Op: core.Update, Key: "TICKET#t1", Set: core.Item{"arguments": "{}"}}}},
		"a store attribute list":  {Items: []core.ItemWrite{{Op: core.Update, Key: "NOTE#1", Append: map[string]string{"delivery_error": "x"}}}},
		"an int, not an int64":    {Items: []core.ItemWrite{{Op: core.PutNew, Key: "NOTE#1", Set: core.Item{"n": 1}}}},
		"a list compared":         {Items: []core.ItemWrite{{Op: core.Check, Key: "NOTE#1", If: []core.Cond{{Op: core.Equals, Attr: "l", Value: []string{"a"}}}}}},
		"a key written twice":     {Items: []core.ItemWrite{{Op: core.PutNew, Key: "NOTE#1"}, {Op: core.Check, Key: "NOTE#1"}}},
		"a ticket made and wrote": {Tickets: []core.Ticket{{ID: "t2", TenantID: "tenant-a", UserID: "alice", OperationKey: "k", Arguments: "{}", CreatedAt: now}}, Items: []core.ItemWrite{{Op: core.Update, Key: "TICKET#t2", Set: core.Item{"status": "open"}}}},
		"more than a transaction": {Items: many},
	} {
		err := claimWrites(ctx, t, s.Store, w, now)
		var r *idem.RefusedError
		if err == nil || errors.As(err, &r) {
			t.Errorf("%s: %v, want an error that is no refusal", name, err)
		}
	}
	if n, err := s.CountTickets(ctx); err != nil || n != 1 {
		t.Errorf("%d tickets (%v), want the one", n, err)
	}
	if s.rawItem(t, "NOTE#1") != nil || s.rawItem(t, "NOTE#0") != nil {
		t.Error("an item was written")
	}
	if tk, err := s.Ticket(ctx, "t1"); err != nil || len(tk.Attrs) != 0 {
		t.Errorf("ticket %+v, %v: changed", tk, err)
	}
}

// TestItemValues: each value type is stored as S, N, BOOL or L of S and
// read back as the Go type it was written with.
func TestItemValues(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	now := time.Now()
	set := core.Item{"s": "text", "empty": "", "unicode": "café ✓", "n": int64(-42), "zero": int64(0),
		"big": int64(1) << 62, "yes": true, "no": false, "list": []string{"a", "", "c"}, "none": []string{}}
	w := core.Writes{Items: []core.ItemWrite{
		{Op: core.PutNew, Key: "NOTE#v", Set: set},
		{Op: core.Update, Key: "NOTE#u", Set: set, Append: map[string]string{"appended": "x"}},
	}}
	if err := claimWrites(ctx, t, s.Store, w, now); err != nil {
		t.Fatal(err)
	}
	got, err := s.Items(ctx, []string{"NOTE#v", "NOTE#u"})
	if err != nil || len(got) != 2 {
		t.Fatalf("Items: %+v, %v", got, err)
	}
	if !reflect.DeepEqual(got[0].Attrs, set) || got[0].Delivery != nil || got[0].Key != "NOTE#v" {
		t.Errorf("put item %+v, want attrs %v", got[0], set)
	}
	want := core.Item{"appended": []string{"x"}}
	for k, v := range set {
		want[k] = v
	}
	if !reflect.DeepEqual(got[1].Attrs, want) {
		t.Errorf("updated item %v, want %v", got[1].Attrs, want)
	}
	raw := s.rawItem(t, "NOTE#v")
	for name, typ := range map[string]string{"s": "S", "n": "N", "yes": "BOOL"} {
		if attrType(raw[name]) != typ {
			t.Errorf("%s stored as %s, want %s", name, attrType(raw[name]), typ)
		}
	}
	if l, ok := raw["list"].(*types.AttributeValueMemberL); !ok || len(l.Value) != 3 || attrType(l.Value[0]) != "S" {
		t.Errorf("list stored as %#v, want an L of S", raw["list"])
	}
}

// TestTicketAttrs: an Update of a ticket's item reads back in Ticket.Attrs
// (and in Items, with tenant_id and user_id), its typed fields and its
// delivery unchanged; a ticket written without them reads empty Attrs.
func TestTicketAttrs(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	now := time.Now()
	newTicket(t, s.Store, "t1", now)
	before, err := s.Ticket(ctx, "t1")
	if err != nil || len(before.Attrs) != 0 {
		t.Fatalf("new ticket %+v, %v: want no Attrs", before, err)
	}
	tk := core.TicketKey("t1")
	for _, w := range []core.ItemWrite{
		{Op: core.Update, Key: tk, Append: map[string]string{core.AttrFollowUps: "COMMENT#c1"},
			If: []core.Cond{{Op: core.Exists}, {Op: core.Equals, Attr: core.AttrTenantID, Value: "tenant-a"},
				{Op: core.EqualsOrAbsent, Attr: "status", Value: "open"}, {Op: core.SizeBelow, Attr: core.AttrFollowUps, Value: 100}}},
		{Op: core.Update, Key: tk, Set: core.Item{"status": "closed", "resolution": "fixed", "close_id": "x1"},
			Append: map[string]string{core.AttrFollowUps: "CLOSE#x1"}},
	} {
		if err := claimWrites(ctx, t, s.Store, core.Writes{Items: []core.ItemWrite{w}}, now); err != nil {
			t.Fatal(err)
		}
	}
	after, err := s.Ticket(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	want := core.Item{"status": "closed", "resolution": "fixed", "close_id": "x1", core.AttrFollowUps: []string{"COMMENT#c1", "CLOSE#x1"}}
	if !reflect.DeepEqual(after.Attrs, want) {
		t.Errorf("Attrs = %v, want %v", after.Attrs, want)
	}
	after.Attrs = nil
	if !reflect.DeepEqual(after, before) {
		t.Errorf("typed fields changed:\n%+v\n%+v", before, after)
	}
	items, err := s.Items(ctx, []string{tk})
	if err != nil || len(items) != 1 {
		t.Fatalf("Items: %+v, %v", items, err)
	}
	want[core.AttrTenantID], want[core.AttrUserID] = "tenant-a", "alice"
	if !reflect.DeepEqual(items[0].Attrs, want) || items[0].Delivery == nil || items[0].Delivery.State != core.DeliveryPending {
		t.Errorf("Items of the ticket: %+v %+v, want attrs %v and its delivery", items[0].Attrs, items[0].Delivery, want)
	}

	// A ticket as the store wrote it before item writes: no attributes
	// beyond its fields and its delivery.
	old := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "TICKET#old"}, "tenant_id": &types.AttributeValueMemberS{Value: "tenant-a"},
		"user_id": &types.AttributeValueMemberS{Value: "alice"}, "operation_key": &types.AttributeValueMemberS{Value: strings.Repeat("e", 64)},
		"arguments": &types.AttributeValueMemberS{Value: `{"title":"Old"}`}, "created_at": &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
		"delivery_state": &types.AttributeValueMemberS{Value: "delivered"}, "delivery_attempts": &types.AttributeValueMemberN{Value: "1"},
		"external_id": &types.AttributeValueMemberS{Value: "42"}, "delivered_at": &types.AttributeValueMemberS{Value: now.UTC().Format(time.RFC3339Nano)},
		"delivery_unknown": &types.AttributeValueMemberBOOL{Value: false}, "traceparent": &types.AttributeValueMemberS{Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: old}); err != nil {
		t.Fatal(err)
	}
	o, err := s.Ticket(ctx, "old")
	if err != nil || len(o.Attrs) != 0 || o.Delivery == nil || o.Delivery.ExternalID != "42" {
		t.Errorf("old ticket %+v, %v: want its fields, its delivery and no Attrs", o, err)
	}
	items, err = s.Items(ctx, []string{"TICKET#old"})
	if err != nil || len(items) != 1 || !reflect.DeepEqual(items[0].Attrs, core.Item{"tenant_id": "tenant-a", "user_id": "alice"}) {
		t.Errorf("Items of the old ticket: %+v, %v", items, err)
	}
}

// unprocessing is a client whose BatchGetItem reads only the first key
// of each request and answers the others unprocessed, as DynamoDB does
// under throttling.
type unprocessing struct {
	dynamo.Client
	calls atomic.Int64
}

func (u *unprocessing) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	u.calls.Add(1)
	var table string
	var ka types.KeysAndAttributes
	for table, ka = range in.RequestItems {
	}
	if !aws.ToBool(ka.ConsistentRead) {
		return nil, errors.New("an inconsistent read")
	}
	first := ka
	first.Keys = ka.Keys[:1]
	out, err := u.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: first}}, opts...)
	if err != nil || len(ka.Keys) == 1 {
		return out, err
	}
	rest := ka
	rest.Keys = ka.Keys[1:]
	rest.ConsistentRead = nil
	out.UnprocessedKeys = map[string]types.KeysAndAttributes{table: rest}
	return out, nil
}

// TestItemsOrder: Items answers in the order of the keys asked, leaves
// absent keys out, reads more keys than one request takes, repeats a
// key asked twice, and asks again for the keys left unprocessed.
func TestItemsOrder(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	now := time.Now()
	newTicket(t, s.Store, "t1", now)
	var ws []core.ItemWrite
	for i := range 60 {
		ws = append(ws, core.ItemWrite{Op: core.PutNew, Key: fmt.Sprintf("NOTE#%03d", i), Set: core.Item{"i": int64(i)}})
	}
	if err := claimWrites(ctx, t, s.Store, core.Writes{Items: ws}, now); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Items(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("Items(nil) = %v, %v", got, err)
	}
	// 150 keys, 100 of them absent, in an order of their own.
	var keys, want []string
	for i := 149; i >= 0; i-- {
		switch {
		case i%3 == 0 && i/3 < 60:
			keys = append(keys, fmt.Sprintf("NOTE#%03d", i/3))
			want = append(want, keys[len(keys)-1])
		case i < 40:
			keys = append(keys, fmt.Sprintf("NOTE#absent-%d", i))
		default:
			keys = append(keys, fmt.Sprintf("NOTE#%03d", 60+i)) // absent too
		}
	}
	keys = append(keys, "TICKET#t1", "NOTE#000", "TICKET#missing")
	want = append(want, "TICKET#t1", "NOTE#000")
	got, err := s.Items(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	var gotKeys []string
	for _, it := range got {
		gotKeys = append(gotKeys, it.Key)
		if strings.HasPrefix(it.Key, "NOTE#") && fmt.Sprintf("NOTE#%03d", it.Attrs.Int("i")) != it.Key {
			t.Errorf("%s read as %v", it.Key, it.Attrs)
		}
	}
	if !slices.Equal(gotKeys, want) {
		t.Errorf("Items keys:\n%v\nwant\n%v", gotKeys, want)
	}

	u := &unprocessing{Client: s.client}
	slow := dynamo.New(u, s.table, dynamo.Options{})
	got, err = slow.Items(ctx, []string{"NOTE#002", "NOTE#absent", "NOTE#001", "TICKET#t1"})
	if err != nil || len(got) != 3 || got[0].Key != "NOTE#002" || got[1].Key != "NOTE#001" || got[2].Key != "TICKET#t1" {
		t.Fatalf("Items with unprocessed keys: %+v, %v", got, err)
	}
	if n := u.calls.Load(); n != 4 {
		t.Errorf("%d BatchGetItem requests, want 4 (one key each)", n)
	}
}

// TestEffectDelivery takes an effect's record through the outbox: the
// claim writes it pending with its kind, delivery key, ticket, payload
// and traceparent; the stream reader, Due and Waiting find it under its
// key; Claim returns the effect; Record, Delivery, List and Settle treat
// it as they treat a ticket's, with its kind.
func TestEffectDelivery(t *testing.T) {
	s, _ := newTable(t)
	now := time.Now()
	ctx := context.Background()
	newTicket(t, s.Store, "t1", now)
	payload := `{"type":"comment.created","comment_id":"c1","ticket_id":"t1","body":"it fails on mobile too"}`
	due := now.Truncate(time.Second)
	w := core.Writes{Items: []core.ItemWrite{
		{Op: core.PutNew, Key: "COMMENT#c1", Set: core.Item{"ticket_id": "t1", "body": "it fails on mobile too"},
			Effect: &core.Effect{Kind: "comment", ID: "c1", TicketID: "t1", Payload: []byte(payload), DueAt: due}},
		{Op: core.Update, Key: core.TicketKey("t1"), Append: map[string]string{core.AttrFollowUps: "COMMENT#c1"}, If: []core.Cond{{Op: core.Exists}}},
		{Op: core.PutNew, Key: "NOTE#n1", Set: core.Item{"body": "no effect"},
			Effect: &core.Effect{Kind: "note", ID: "n1", Payload: []byte(`{"type":"note"}`), DueAt: due}},
		{Op: core.PutNew, Key: "COMMENT#plain", Set: core.Item{"body": "no delivery"}},
	}, Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	if err := claimWrites(ctx, t, s.Store, w, now); err != nil {
		t.Fatal(err)
	}

	// The stream reader: the effects' images give their keys.
	image := func(pk string) []byte {
		b, err := attributevalue.MarshalMapJSON(s.rawItem(t, pk))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for pk, want := range map[string]string{"COMMENT#c1": "COMMENT#c1", "NOTE#n1": "NOTE#n1", "TICKET#t1": "t1", "COMMENT#plain": ""} {
		if id, ok, err := dynamo.PendingTicketID(image(pk)); err != nil || id != want || ok != (want != "") {
			t.Errorf("PendingTicketID(%s) = %q %v %v, want %q", pk, id, ok, err, want)
		}
	}
	for name, img := range map[string]string{
		"pending, no kind":      `{"pk":{"S":"COMMENT#x"},"delivery_state":{"S":"pending"}}`,
		"an operation's key":    `{"pk":{"S":"OP#x"},"delivery_state":{"S":"pending"},"delivery_kind":{"S":"comment"}}`,
		"an effect delivered":   `{"pk":{"S":"COMMENT#x"},"delivery_state":{"S":"delivered"},"delivery_kind":{"S":"comment"}}`,
		"an effect not pending": `{"pk":{"S":"COMMENT#x"},"delivery_kind":{"S":"comment"}}`,
	} {
		if id, ok, err := dynamo.PendingTicketID([]byte(img)); err != nil || ok || id != "" {
			t.Errorf("%s: %q %v %v, want none", name, id, ok, err)
		}
	}
	if _, _, err := dynamo.PendingTicketID([]byte(`{"pk":{"S":"COMMENT#x"},"delivery_state":{"S":"pending"},"delivery_kind":{"BOOL":true}}`)); err == nil {
		t.Error("a kind that is no string: no error")
	}

	items, err := s.Items(ctx, []string{"COMMENT#c1", "COMMENT#plain"})
	if err != nil || len(items) != 2 || items[0].Delivery == nil || items[0].Delivery.State != core.DeliveryPending ||
		!items[0].Delivery.DueAt.Equal(due) || items[1].Delivery != nil ||
		!reflect.DeepEqual(items[0].Attrs, core.Item{"ticket_id": "t1", "body": "it fails on mobile too"}) {
		t.Fatalf("Items: %+v, %v", items, err)
	}
	ids, err := s.Due(ctx, now, 10)
	slices.Sort(ids)
	if err != nil || !slices.Equal(ids, []string{"COMMENT#c1", "NOTE#n1", "t1"}) {
		t.Fatalf("Due = %v, %v", ids, err)
	}
	if n, err := s.Waiting(ctx); err != nil || n != 3 {
		t.Errorf("Waiting = %d, %v, want 3", n, err)
	}
	rec, err := s.Delivery(ctx, "COMMENT#c1")
	if err != nil || rec.TicketID != "COMMENT#c1" || rec.Kind != "comment" || rec.State != delivery.StatePending ||
		rec.Traceparent != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" || !rec.DueAt.Equal(due) {
		t.Errorf("Delivery = %+v, %v", rec, err)
	}
	if r, err := s.Delivery(ctx, "t1"); err != nil || r.Kind != delivery.KindTicket || r.TicketID != "t1" {
		t.Errorf("ticket's Delivery = %+v, %v", r, err)
	}
	for _, id := range []string{"COMMENT#plain", "COMMENT#absent", "TICKET#t1", "OP#x"} {
		if _, err := s.Delivery(ctx, id); !errors.Is(err, delivery.ErrNoRecord) {
			t.Errorf("Delivery(%s): %v, want ErrNoRecord", id, err)
		}
		if _, err := s.Claim(ctx, id, "w", now, now.Add(time.Minute)); !errors.Is(err, delivery.ErrNotClaimable) {
			t.Errorf("Claim(%s): %v, want ErrNotClaimable", id, err)
		}
	}

	c, err := s.Claim(ctx, "COMMENT#c1", "w1", now, now.Add(30*time.Second))
	wantEffect := &delivery.Effect{Kind: "comment", ID: "c1", TicketID: "t1", Payload: []byte(payload)}
	if err != nil || c.Ticket.ID != "COMMENT#c1" || !reflect.DeepEqual(c.Effect, wantEffect) || c.Before.State != delivery.StatePending ||
		c.Before.Kind != "comment" || c.Before.TicketID != "COMMENT#c1" {
		t.Fatalf("Claim = %+v (effect %+v), %v", c, c.Effect, err)
	}
	if _, err := s.Claim(ctx, "COMMENT#c1", "w2", now, now.Add(30*time.Second)); !errors.Is(err, delivery.ErrNotClaimable) {
		t.Errorf("second Claim: %v, want ErrNotClaimable", err)
	}
	n, err := s.Claim(ctx, "NOTE#n1", "w1", now, now.Add(30*time.Second))
	if err != nil || n.Effect == nil || n.Effect.TicketID != "" || n.Effect.Kind != "note" {
		t.Fatalf("Claim of an effect without a ticket = %+v, %v", n, err)
	}
	if err := s.Record(ctx, "COMMENT#c1", "w2", delivery.Update{State: delivery.StateDelivered}); !errors.Is(err, delivery.ErrLeaseLost) {
		t.Errorf("Record by another owner: %v, want ErrLeaseLost", err)
	}
	if err := s.Record(ctx, "COMMENT#c1", "w1", delivery.Update{State: delivery.StateDelivered, Attempts: 1,
		ExternalID: "a-1", DeliveredAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "NOTE#n1", "w1", delivery.Update{State: delivery.StateUnknown, Attempts: 8, SentUnknown: true,
		SentAt: now.Truncate(time.Millisecond), Error: "timeouts"}); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.Due(ctx, now.Add(time.Hour), 10); err != nil || !slices.Equal(ids, []string{"t1"}) {
		t.Errorf("Due after the records = %v, %v", ids, err)
	}
	rec, err = s.Delivery(ctx, "COMMENT#c1")
	if err != nil || rec.State != delivery.StateDelivered || rec.Kind != "comment" || rec.ExternalID != "a-1" || rec.Traceparent == "" {
		t.Errorf("Delivery after Record = %+v, %v", rec, err)
	}
	if items, err := s.Items(ctx, []string{"COMMENT#c1"}); err != nil || items[0].Delivery.State != core.DeliveryDelivered ||
		items[0].Delivery.ExternalID != "a-1" || len(items[0].Attrs) != 2 {
		t.Errorf("Items after Record = %+v, %v", items, err)
	}
	list, err := s.List(ctx, delivery.StateUnknown, 10)
	if err != nil || len(list) != 1 || list[0].TicketID != "NOTE#n1" || list[0].Kind != "note" {
		t.Fatalf("List(unknown) = %+v, %v", list, err)
	}
	if list, err := s.List(ctx, delivery.StateDelivered, 10); err != nil || len(list) != 1 || list[0].TicketID != "COMMENT#c1" {
		t.Errorf("List(delivered) = %+v, %v", list, err)
	}
	if err := s.Settle(ctx, "NOTE#n1", list[0], delivery.Update{State: delivery.StateDelivered, Attempts: 8, ExternalID: "n-1", DeliveredAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, "NOTE#n1", list[0], delivery.Update{State: delivery.StateFailed}); err == nil {
		t.Error("Settle on a stale read: no error")
	}
	if err := s.Settle(ctx, "COMMENT#absent", list[0], delivery.Update{State: delivery.StateFailed}); !errors.Is(err, delivery.ErrNoRecord) {
		t.Errorf("Settle of no record: %v, want ErrNoRecord", err)
	}
	if rec, err := s.Delivery(ctx, "NOTE#n1"); err != nil || rec.State != delivery.StateDelivered || rec.ExternalID != "n-1" || rec.Kind != "note" {
		t.Errorf("Delivery after Settle = %+v, %v", rec, err)
	}
	if n, err := s.Waiting(ctx); err != nil || n != 1 {
		t.Errorf("Waiting = %d, %v, want 1 (the ticket)", n, err)
	}
}

// TestSequencer: Neighbours reads an effect's ticket and the ticket's
// follow-ups; Wake makes a follow-up that waits due now, and nothing
// else.
func TestSequencer(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	now := time.Now()
	later := now.Add(time.Hour).Truncate(time.Second)
	newTicket(t, s.Store, "t1", now)
	effect := func(key, kind, id, ticket string) core.ItemWrite {
		return core.ItemWrite{Op: core.PutNew, Key: key, Set: core.Item{"ticket_id": ticket},
			Effect: &core.Effect{Kind: kind, ID: id, TicketID: ticket, Payload: []byte(`{}`), DueAt: later}}
	}
	follow := func(key string) core.ItemWrite {
		return core.ItemWrite{Op: core.Update, Key: "TICKET#t1", Append: map[string]string{core.AttrFollowUps: key}, If: []core.Cond{{Op: core.Exists}}}
	}
	for _, w := range [][]core.ItemWrite{
		{effect("COMMENT#a", "comment", "a", "t1"), follow("COMMENT#a")},
		{effect("COMMENT#b", "comment", "b", "t1"), follow("COMMENT#b")},
		{effect("CLOSE#z", "close", "z", "t1"), follow("CLOSE#z")},
		{effect("NOTE#alone", "note", "alone", "")},
	} {
		if err := claimWrites(ctx, t, s.Store, core.Writes{Items: w}, now); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string][3]string{
		"t1":         {"t1", "", "COMMENT#a"},
		"COMMENT#a":  {"t1", "t1", "COMMENT#b"},
		"COMMENT#b":  {"t1", "COMMENT#a", "CLOSE#z"},
		"CLOSE#z":    {"t1", "COMMENT#b", ""},
		"NOTE#alone": {"", "", ""},
		"t-none":     {"t-none", "", ""},
	} {
		ticket, before, after, err := s.Neighbours(ctx, id)
		if err != nil || [3]string{ticket, before, after} != want {
			t.Errorf("Neighbours(%s) = %q %q %q %v, want %q", id, ticket, before, after, err, want)
		}
	}
	for _, id := range []string{"COMMENT#absent", "TICKET#t1"} {
		if _, _, _, err := s.Neighbours(ctx, id); !errors.Is(err, delivery.ErrNoRecord) {
			t.Errorf("Neighbours(%s): %v, want ErrNoRecord", id, err)
		}
	}

	dueAt := func(id string) time.Time {
		t.Helper()
		r, err := s.Delivery(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r.DueAt
	}
	// A follow-up never sent, due later: due now.
	if err := s.Wake(ctx, "COMMENT#a", now); err != nil || !dueAt("COMMENT#a").Equal(time.Unix(now.Unix(), 0)) {
		t.Errorf("Wake: %v, due at %v, want %v", err, dueAt("COMMENT#a"), time.Unix(now.Unix(), 0))
	}
	// Already due: unchanged, even by a later now.
	if err := s.Wake(ctx, "COMMENT#a", now.Add(time.Minute)); err != nil || !dueAt("COMMENT#a").Equal(time.Unix(now.Unix(), 0)) {
		t.Errorf("Wake of a due record: %v, due at %v", err, dueAt("COMMENT#a"))
	}
	// Sent once, back to pending: not woken.
	if _, err := s.Claim(ctx, "COMMENT#b", "w", later, later.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, "COMMENT#b", "w", delivery.Update{State: delivery.StatePending, Attempts: 1, DueAt: later.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Wake(ctx, "COMMENT#b", now); err != nil || !dueAt("COMMENT#b").Equal(later.Add(time.Hour)) {
		t.Errorf("Wake of a record sent once: %v, due at %v", err, dueAt("COMMENT#b"))
	}
	// Delivering: not woken.
	if _, err := s.Claim(ctx, "CLOSE#z", "w", later, later.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Delivery(ctx, "CLOSE#z")
	if err := s.Wake(ctx, "CLOSE#z", now); err != nil {
		t.Error(err)
	}
	if after, _ := s.Delivery(ctx, "CLOSE#z"); !reflect.DeepEqual(before, after) {
		t.Errorf("Wake changed a delivering record: %+v → %+v", before, after)
	}
	// No record, or no outbox item: nothing, and nothing made.
	for _, id := range []string{"COMMENT#absent", "TICKET#t1", "t-none"} {
		if err := s.Wake(ctx, id, now); err != nil {
			t.Errorf("Wake(%s): %v", id, err)
		}
	}
	if s.rawItem(t, "COMMENT#absent") != nil || s.rawItem(t, "TICKET#t-none") != nil {
		t.Error("Wake made an item")
	}
}

// TestConcurrentFollowUps: claims racing to append to one ticket's
// follow-ups under SizeBelow 100, each with its own item. Every claim
// that committed is in the list once, with its item; no append is lost
// or doubled; the list never passes the bound, and the claims past it
// are refused at the ticket's update. Transaction conflicts are retried
// by dynamostore.
func TestConcurrentFollowUps(t *testing.T) {
	s, _ := newTable(t)
	ctx := context.Background()
	now := time.Now()
	newTicket(t, s.Store, "t1", now)
	const prefilled, racers = 88, 24
	var start []string
	for i := range prefilled {
		start = append(start, fmt.Sprintf("COMMENT#old-%d", i))
	}
	if err := claimWrites(ctx, t, s.Store, core.Writes{Items: []core.ItemWrite{
		{Op: core.Update, Key: "TICKET#t1", Set: core.Item{core.AttrFollowUps: start}}}}, now); err != nil {
		t.Fatal(err)
	}
	// Generous retries: the race is the subject, not the retry budget.
	racing := dynamo.New(s.client, s.table, dynamo.Options{ConflictRetries: 50, ConflictBackoffMax: 200 * time.Millisecond})
	results := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			key := fmt.Sprintf("COMMENT#new-%d", i)
			results[i] = claimWrites(ctx, t, racing, core.Writes{Items: []core.ItemWrite{
				{Op: core.PutNew, Key: key, Set: core.Item{"ticket_id": "t1"},
					Effect: &core.Effect{Kind: "comment", ID: key, TicketID: "t1", Payload: []byte(`{}`), DueAt: now}},
				{Op: core.Update, Key: "TICKET#t1", Append: map[string]string{core.AttrFollowUps: key},
					If: []core.Cond{{Op: core.Exists}, {Op: core.SizeBelow, Attr: core.AttrFollowUps, Value: 100}}},
			}}, now)
		})
	}
	wg.Wait()
	tk, err := s.Ticket(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	list := tk.Attrs.List(core.AttrFollowUps)
	if len(list) > 100 || !slices.Equal(list[:prefilled], start) {
		t.Fatalf("%d follow-ups, want at most 100 beginning with the %d before", len(list), prefilled)
	}
	inList := map[string]int{}
	for _, k := range list[prefilled:] {
		inList[k]++
	}
	committed, refused, busy := 0, 0, 0
	for i, err := range results {
		key := fmt.Sprintf("COMMENT#new-%d", i)
		var r *idem.RefusedError
		switch {
		case err == nil:
			committed++
			if inList[key] != 1 {
				t.Errorf("%s committed, in the list %d times", key, inList[key])
			}
		case errors.As(err, &r):
			refused++
			if r.Index != 1 || inList[key] != 0 || s.rawItem(t, key) != nil {
				t.Errorf("%s refused at %d, in the list %d times, item %v", key, r.Index, inList[key], s.rawItem(t, key) != nil)
			}
		case errors.Is(err, idem.ErrBusy):
			busy++ // unknown outcome: the checks below hold for it either way
		default:
			t.Errorf("%s: %v", key, err)
		}
	}
	for k, n := range inList {
		if n != 1 || s.rawItem(t, k) == nil {
			t.Errorf("%s in the list %d times, its item %v", k, n, s.rawItem(t, k) != nil)
		}
	}
	t.Logf("%d committed, %d refused, %d busy; %d follow-ups", committed, refused, busy, len(list))
	if busy == 0 && (committed != 100-prefilled || refused != racers-committed || len(list) != 100) {
		t.Errorf("%d committed and %d refused, %d follow-ups: want %d, %d and 100", committed, refused, len(list), 100-prefilled, racers-100+prefilled)
	}
	if ids, err := s.Due(ctx, now, 100); err != nil || len(ids) != 1+len(inList) {
		t.Errorf("Due: %d ids, %v, want the ticket and %d comments", len(ids), err, len(inList))
	}
}
