package deliverylambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/jsonlines"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type fixture struct {
	env    *deliverytest.Env
	client *dynamodb.Client
	table  string
	store  *dynamo.Store
	fake   *fakehelpdesk.Server
	logs   *testenv.Buffer
	h      *deliverylambda.Handler
}

const token = "TOKEN-NEVER-LOGGED"

// tableFixture is a fixture on a fresh table of DynamoDB Local (at
// endpoint): its client, store and env, no helpdesk and no handler.
func tableFixture(t *testing.T) (f *fixture, endpoint string) {
	t.Helper()
	endpoint = testenv.DynamoDB(t)
	f = &fixture{table: testenv.CreateTable(t, endpoint), client: testenv.DynamoClient(t, endpoint), logs: &testenv.Buffer{}}
	f.store = dynamo.New(f.client, f.table, dynamo.Options{})
	f.env = deliverytest.NewEnv(t, f.store, true)
	return f, endpoint
}

// countingFixture is tableFixture beside a store on the same table whose
// DynamoDB calls count in calls.
func countingFixture(t *testing.T) (f *fixture, counted *dynamo.Store, calls *atomic.Int64) {
	t.Helper()
	f, endpoint := tableFixture(t)
	calls = new(atomic.Int64)
	counted = dynamo.New(testenv.DynamoClient(t, endpoint, testenv.CountCalls(calls)), f.table, dynamo.Options{})
	return f, counted, calls
}

func newFixture(t *testing.T, wrap func(delivery.Outbox) delivery.Outbox) *fixture {
	t.Helper()
	f, _ := tableFixture(t)
	f.fake = fakehelpdesk.New(t, fakehelpdesk.Config{Email: "agent@acme.com", Token: token})
	dst := zendeskFor(t, f.fake)
	var store delivery.Outbox = f.store
	if wrap != nil {
		store = wrap(store)
	}
	log := slog.New(slog.NewJSONHandler(f.logs, nil))
	f.h = deliverylambda.New(delivery.Engine{MaxAttempts: 3, Lease: delivery.LeaseFor(2 * time.Second)}, store, dst, log)
	return f
}

// zendeskFor is the zendesk destination of the fake helpdesk.
func zendeskFor(t *testing.T, fake *fakehelpdesk.Server) delivery.Destination {
	t.Helper()
	c := fake.Config()
	dst, err := zendesk.New(zendesk.Config{URL: fake.URL(), Email: c.Email, Token: c.Token, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// image reads an item as it is stored and returns it as a stream record's
// NewImage would carry it.
func (f *fixture) image(t *testing.T, pk string) json.RawMessage {
	t.Helper()
	out, err := f.client.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &f.table,
		Key: map[string]types.AttributeValue{dynamo.PartitionKey: &types.AttributeValueMemberS{Value: pk}}, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("GetItem %s: %v (found %t)", pk, err, out != nil && out.Item != nil)
	}
	b, err := attributevalue.MarshalMapJSON(out.Item)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type rec struct {
	seq, name string
	image     json.RawMessage
}

// batch builds a stream batch as Lambda sends it.
func batch(t *testing.T, records ...rec) json.RawMessage {
	t.Helper()
	type change struct {
		SequenceNumber string          `json:"SequenceNumber"`
		NewImage       json.RawMessage `json:"NewImage,omitempty"`
		StreamViewType string          `json:"StreamViewType"`
	}
	type record struct {
		EventID     string `json:"eventID"`
		EventName   string `json:"eventName"`
		EventSource string `json:"eventSource"`
		Change      change `json:"dynamodb"`
	}
	var ev struct {
		Records []record `json:"Records"`
	}
	for _, r := range records {
		ev.Records = append(ev.Records, record{EventID: "e" + r.seq, EventName: r.name, EventSource: "aws:dynamodb",
			Change: change{SequenceNumber: r.seq, NewImage: r.image, StreamViewType: "NEW_IMAGE"}})
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// asSDKEvent checks that a batch reads as the SDK's own event type.
func asSDKEvent(t *testing.T, b json.RawMessage, n int) {
	t.Helper()
	var check events.DynamoDBEvent
	if err := json.Unmarshal(b, &check); err != nil || len(check.Records) != n {
		t.Fatalf("not an events.DynamoDBEvent of %d records: %v", n, err)
	}
}

func (f *fixture) handle(t *testing.T, ev json.RawMessage) any {
	t.Helper()
	out, err := f.h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	return out
}

func failures(t *testing.T, out any) []string {
	t.Helper()
	resp, ok := out.(events.DynamoDBEventResponse)
	if !ok {
		t.Fatalf("answer %T, want events.DynamoDBEventResponse", out)
	}
	var seqs []string
	for _, f := range resp.BatchItemFailures {
		seqs = append(seqs, f.ItemIdentifier)
	}
	return seqs
}

// TestStreamBatch: the pending tickets of a batch reach the helpdesk once
// each, also when a record comes twice in the batch and when the whole
// batch comes again; records of other items, of tickets in another state
// and removals are ignored, not failed; one JSON log line per ticket
// step, with its id, state and attempts, and never the token.
func TestStreamBatch(t *testing.T) {
	f := newFixture(t, nil)
	a := f.env.Create(`{"title":"Printer on fire"}`)
	b := f.env.Create(`{"title":"VPN down","priority":"high"}`)
	final := f.env.Create(`{"title":"Done already"}`)
	if _, err := f.h.Handle(context.Background(), batch(t, rec{"1", "INSERT", f.image(t, "TICKET#"+final)})); err != nil {
		t.Fatal(err)
	}
	finalImage := f.image(t, "TICKET#"+final) // now delivered
	if _, err := f.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &f.table, Item: map[string]types.AttributeValue{
		dynamo.PartitionKey: &types.AttributeValueMemberS{Value: "USER#u-1"}, "delivery_state": &types.AttributeValueMemberS{Value: "pending"},
	}}); err != nil {
		t.Fatal(err)
	}
	mark := len(f.logs.String())
	ev := batch(t,
		rec{"10", "INSERT", f.image(t, "TICKET#"+a)},
		rec{"11", "INSERT", f.image(t, "TICKET#"+b)},
		rec{"12", "INSERT", f.image(t, "TICKET#"+a)}, // the same record twice
		rec{"13", "INSERT", f.image(t, "USER#u-1")},
		rec{"14", "MODIFY", finalImage},
		rec{"15", "REMOVE", nil},
	)
	asSDKEvent(t, ev, 6)
	if got := failures(t, f.handle(t, ev)); len(got) != 0 {
		t.Errorf("batch item failures %v, want none", got)
	}
	if got := failures(t, f.handle(t, ev)); len(got) != 0 { // the stream delivers the batch again
		t.Errorf("repeated batch: failures %v, want none", got)
	}
	for _, id := range []string{a, b, final} {
		if n := f.fake.Held(id); n != 1 {
			t.Errorf("helpdesk holds %d tickets for %s, want 1", n, id)
		}
		r := f.env.Record(id)
		if r.State != delivery.StateDelivered || r.ExternalID == "" || r.Attempts != 1 {
			t.Errorf("%s: %+v, want delivered with an external id after 1 attempt", id, r)
		}
	}
	if f.fake.Total() != 3 {
		t.Errorf("helpdesk holds %d tickets, want 3", f.fake.Total())
	}
	logs := f.logs.String()[mark:]
	if strings.Contains(logs, token) || strings.Contains(logs, "token:") {
		t.Errorf("the token is in the logs:\n%s", logs)
	}
	delivered := map[string]int{}
	for _, l := range jsonlines.Decode(t, logs) {
		if l["msg"] == "delivery" && l["state"] == "delivered" {
			delivered[l["id"].(string)]++
			if l["attempts"] != float64(1) || l["external_id"] == "" {
				t.Errorf("log line %v: want attempts 1 and the external id", l)
			}
		}
	}
	if delivered[a] != 1 || delivered[b] != 1 || len(delivered) != 2 {
		t.Errorf("delivered log lines per ticket %v, want one each for %s and %s:\n%s", delivered, a, b, logs)
	}
}

// failingClaims makes every Claim fail as a throttled store would.
type failingClaims struct{ delivery.Outbox }

func (failingClaims) Claim(context.Context, string, string, time.Time, time.Time) (delivery.Claimed, error) {
	return delivery.Claimed{}, errors.New("ProvisionedThroughputExceededException")
}

// TestStreamReportsFailures: a record whose step failed, and a record
// that cannot be read, are reported by sequence number (Lambda retries
// them, then sends them to the dead-letter queue); ignored records are
// not.
func TestStreamReportsFailures(t *testing.T) {
	f := newFixture(t, func(s delivery.Outbox) delivery.Outbox { return failingClaims{s} })
	a := f.env.Create(`{"title":"Printer on fire"}`)
	ev := batch(t,
		rec{"20", "INSERT", f.image(t, "TICKET#"+a)},
		rec{"21", "INSERT", json.RawMessage(`{"pk":{"Q":"not an attribute value"}}`)},
		rec{"22", "REMOVE", nil},
	)
	got := failures(t, f.handle(t, ev))
	if fmt.Sprint(got) != "[20 21]" {
		t.Errorf("batch item failures %v, want [20 21]", got)
	}
	if f.fake.Total() != 0 {
		t.Errorf("helpdesk holds %d tickets, want 0", f.fake.Total())
	}
	if r := f.env.Record(a); r.State != delivery.StatePending {
		t.Errorf("ticket %s is %s, want still pending", a, r.State)
	}
}

// TestScheduledSweep: a scheduled event delivers a ticket left pending
// with a due time in the past, and leaves one whose backoff has not ended.
func TestScheduledSweep(t *testing.T) {
	f := newFixture(t, nil)
	due := f.env.Create(`{"title":"Left behind"}`)
	later := f.env.Create(`{"title":"Backing off"}`)
	f.env.Release(due, time.Now().Add(-time.Minute))
	f.env.Release(later, time.Now().Add(time.Hour))
	out := f.handle(t, json.RawMessage(`{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events",
		"account":"123456789012","time":"2026-12-01T03:00:00Z","region":"us-east-1","resources":[],"detail":{}}`))
	res, ok := out.(deliverylambda.SweepResult)
	if !ok || res.Moved != 1 {
		t.Fatalf("answer %#v, want SweepResult{Moved: 1}", out)
	}
	if r := f.env.Record(due); r.State != delivery.StateDelivered || f.fake.Held(due) != 1 {
		t.Errorf("due ticket: %s, helpdesk holds %d; want delivered once", r.State, f.fake.Held(due))
	}
	if r := f.env.Record(later); r.State != delivery.StatePending || f.fake.Held(later) != 0 {
		t.Errorf("backing-off ticket: %s, helpdesk holds %d; want pending, not sent", r.State, f.fake.Held(later))
	}
}

// TestUnknownEvent: an event that is neither kind is a clear error.
func TestUnknownEvent(t *testing.T) {
	f := newFixture(t, nil)
	for _, ev := range []string{`{"detail-type":"Object Created"}`, `[1,2]`, `{}`} {
		out, err := f.h.Handle(context.Background(), json.RawMessage(ev))
		if err == nil {
			t.Errorf("%s: answered %v, want an error", ev, out)
		}
	}
}
