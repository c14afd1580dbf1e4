package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/jsonlines"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/streamtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// createDelay is how long the fake helpdesk takes over each create (on
// the webhook, over each POST): long enough that the stream records of a
// ticket's follow-ups, handed over beside the ticket's, are stepped while
// the ticket is still being delivered.
const createDelay = 300 * time.Millisecond

// followUpGap is the longest a follow-up may be delivered after its
// predecessor on the stream path: a second or two, not WaitRecheck (the
// sweep's fallback).
const followUpGap = 2 * time.Second

// streamFollowUps is the delivery function, built by its composition root
// from the environment a destination of the fake helpdesk needs, on a
// stream-enabled table of DynamoDB Local, and an Env whose service writes
// tickets, comments and closes to that table.
type streamFollowUps struct {
	dest                string
	endpoint, streamARN string
	fake                *fakehelpdesk.Server
	env                 *deliverytest.Env
	h                   *deliverylambda.Handler
	logs                *testenv.Buffer
	es                  esmSettings
}

func newStreamFollowUps(t *testing.T, dest string) *streamFollowUps {
	t.Helper()
	s := &streamFollowUps{dest: dest, endpoint: testenv.DynamoDB(t), es: templateESM(t), logs: &testenv.Buffer{}}
	var table string
	table, s.streamARN = streamTable(t, s.endpoint)
	s.fake = fakehelpdesk.New(t, fakehelpdesk.Config{})
	s.fake.Script(fakehelpdesk.Rule{Kind: createKindOf(dest), Times: 1 << 30, Fault: fakehelpdesk.Fault{Delay: createDelay}})
	fc := s.fake.Config()
	vars := map[string]string{"TABLE_NAME": table, "DELIVERY_KIND": dest, "DELIVERY_TIMEOUT": "3s"}
	switch dest {
	case "zendesk":
		vars["DELIVERY_URL"] = s.fake.URL()
		vars["DELIVERY_SECRET"] = `{"email":"` + fc.Email + `","token":"` + fc.Token + `"}`
	case "webhook":
		vars["DELIVERY_URL"] = s.fake.WebhookURL()
		vars["DELIVERY_SECRET"] = `{"secret":"` + fc.Secret + `"}`
		vars["DELIVERY_LOOKUP"] = "true"
	case "linear":
		vars["DELIVERY_URL"] = s.fake.LinearURL()
		vars["DELIVERY_TEAM_ID"] = fc.LinearTeamID
		vars["DELIVERY_SECRET"] = `{"api_key":"` + fc.LinearKey + `"}`
	}
	testenv.IsolatedAWSEnv(t, map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": s.endpoint})
	var err error
	if s.h, err = deliveryFromEnv(vars, slog.New(slog.NewJSONHandler(s.logs, nil))); err != nil {
		t.Fatal(err)
	}
	// A long call timeout: the first transactions on a DynamoDB Local just
	// started can take seconds, and Env takes no busy answer.
	s.env = deliverytest.NewEnv(t, dynamo.New(testenv.DynamoClient(t, s.endpoint), table, dynamo.Options{CallTimeout: 10 * time.Second}), true)
	return s
}

// createKindOf is the fake's request kind of a ticket's create on dest.
func createKindOf(dest string) fakehelpdesk.Kind {
	switch dest {
	case "zendesk":
		return fakehelpdesk.ZendeskCreate
	case "linear":
		return fakehelpdesk.LinearCreate
	}
	return fakehelpdesk.WebhookCreate
}

// streamThread is a ticket and its follow-ups' outbox ids in commit
// order: two comments, then the close.
type streamThread struct {
	ticket    string
	followUps []string
}

// open makes a ticket, two comments on it and its close through the
// service, as the callback function would.
func (s *streamFollowUps) open(title string) streamThread {
	th := streamThread{ticket: s.env.Create(`{"title":"` + title + `"}`)}
	th.followUps = append(th.followUps,
		s.env.Comment(th.ticket, "It fails on my phone too."),
		s.env.Comment(th.ticket, "And on the tablet."),
		s.env.CloseTicket(th.ticket, "Works now, thanks."))
	return th
}

// ids is every outbox id of th, the ticket first.
func (th streamThread) ids() []string { return append([]string{th.ticket}, th.followUps...) }

// wantOrder is what the helpdesk must hold of th on the destination, in
// order: the create, each comment, the close (on Linear the close's
// resolution is a comment with the close's id, then the move to a
// completed state).
func (s *streamFollowUps) wantOrder(th streamThread) []string {
	want := []string{"create"}
	for _, id := range th.followUps {
		kind, key, _ := strings.Cut(id, "#")
		switch {
		case kind == "COMMENT":
			want = append(want, "comment:"+key)
		case s.dest == "linear":
			want = append(want, "comment:"+key, "state:completed")
		default:
			want = append(want, "close:"+key)
		}
	}
	return want
}

// records reads the table's stream as the event source mapping does and
// returns, in stream order, the records the template's filter passes of
// the outbox ids given (a ticket's id, or a follow-up's item key), one
// pending insert of each.
func (s *streamFollowUps) records(t *testing.T, ids ...string) []events.DynamoDBEventRecord {
	t.Helper()
	raw, _ := streamtest.Event(t, s.endpoint, s.streamARN, ids)
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	var out []events.DynamoDBEventRecord
	for _, r := range ev.Records {
		pk := r.Change.Keys[dynamo.PartitionKey].String()
		if slices.Contains(ids, strings.TrimPrefix(pk, "TICKET#")) {
			out = append(out, r)
		}
	}
	if len(out) != len(ids) {
		t.Fatalf("the stream holds %d pending inserts of %d outbox records", len(out), len(ids))
	}
	return out
}

// esm hands recs to the handler as Lambda's event source mapping does
// with the template's settings: spread over ParallelizationFactor lanes by
// partition key (one item's records stay in order in one lane), each lane
// invoking the handler with one batch of up to BatchSize records at a
// time, the lanes side by side. It returns the batch item failures.
func (s *streamFollowUps) esm(t *testing.T, recs []events.DynamoDBEventRecord) []string {
	t.Helper()
	lanes := make([][]events.DynamoDBEventRecord, s.es.parallel)
	for _, r := range recs {
		i := laneOf(r, s.es.parallel)
		lanes[i] = append(lanes[i], r)
	}
	var mu sync.Mutex
	var failed []string
	var wg sync.WaitGroup
	for _, lane := range lanes {
		wg.Go(func() {
			for batch := range slices.Chunk(lane, s.es.batchSize) {
				f := s.invoke(t, batch)
				mu.Lock()
				failed = append(failed, f...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// invoke hands one batch to the handler and returns its item failures.
func (s *streamFollowUps) invoke(t *testing.T, batch []events.DynamoDBEventRecord) []string {
	raw, err := json.Marshal(events.DynamoDBEvent{Records: batch})
	if err != nil {
		t.Error(err)
		return nil
	}
	out, err := s.h.Handle(context.Background(), raw)
	if err != nil {
		t.Errorf("stream batch: %v", err)
		return nil
	}
	var seqs []string
	for _, f := range out.(events.DynamoDBEventResponse).BatchItemFailures {
		seqs = append(seqs, f.ItemIdentifier)
	}
	return seqs
}

// sweep is one scheduled event; it returns how many records it moved on.
func (s *streamFollowUps) sweep(t *testing.T) int {
	out, err := s.h.Handle(context.Background(), json.RawMessage(`{"detail-type":"Scheduled Event"}`))
	if err != nil {
		t.Errorf("sweep: %v", err)
		return 0
	}
	return out.(deliverylambda.SweepResult).Moved
}

// checkDelivered checks that the helpdesk holds th once, in order, that
// each record was delivered at its first attempt, and, when gap is set,
// that each follow-up was delivered within gap of its predecessor.
func (s *streamFollowUps) checkDelivered(t *testing.T, th streamThread, gap time.Duration) {
	t.Helper()
	if got, want := s.fake.Order(th.ticket), s.wantOrder(th); !slices.Equal(got, want) {
		t.Errorf("the helpdesk holds %v of %s; want %v", got, th.ticket, want)
	}
	var prev delivery.Record
	for i, id := range th.ids() {
		r := s.env.Record(id)
		if r.State != delivery.StateDelivered || r.Attempts != 1 {
			t.Errorf("%s: %s after %d attempts (%s); want delivered at the first", id, r.State, r.Attempts, r.Error)
		}
		if i > 0 && gap > 0 {
			if d := r.DeliveredAt.Sub(prev.DeliveredAt); d < 0 || d > gap {
				t.Errorf("%s delivered %v after its predecessor; want within %v", id, d, gap)
			}
		}
		prev = r
	}
}

// steps counts the delivery function's step lines by id and state.
func (s *streamFollowUps) steps(t *testing.T) map[string]map[string]int {
	t.Helper()
	n := map[string]map[string]int{}
	for _, l := range jsonlines.Decode(t, s.logs.String()) {
		id, _ := l["id"].(string)
		st, _ := l["state"].(string)
		if l["msg"] != "delivery" || id == "" {
			continue
		}
		if n[id] == nil {
			n[id] = map[string]int{}
		}
		n[id][st]++
		if kind := l["kind"]; kind != delivery.KindOfID(id) {
			t.Errorf("the step line of %s says kind %v, want %s", id, kind, delivery.KindOfID(id))
		}
	}
	return n
}

// TestFollowUpsOnTheStream is the follow-ups' delivery as Lambda runs the
// delivery function, against each destination of the fake helpdesk:
// tickets, two comments each and their closes written through the
// service on DynamoDB Local, the table's own stream read and filtered as
// template.yaml's event source mapping does, and handed to the function's
// handler (built by its composition root from the environment) in
// batches over ParallelizationFactor lanes, the ticket's records and its
// follow-ups' side by side. The stream orders records per item only; the
// order in the helpdesk comes from the engine.
func TestFollowUpsOnTheStream(t *testing.T) {
	for _, dest := range []string{"webhook", "zendesk", "linear"} {
		t.Run(dest, func(t *testing.T) { testFollowUpsOnTheStream(t, dest) })
	}
}

func testFollowUpsOnTheStream(t *testing.T, dest string) {
	// The records of each ticket and its follow-ups come in together: the
	// follow-ups' steps find the ticket being delivered and wait, and the
	// step that delivers a record moves on to the next, so that every
	// follow-up is delivered, in order, by the time the stream's
	// invocations return, within moments of its predecessor, with no
	// sweep (a waiting follow-up is not due again for WaitRecheck).
	t.Run("stream alone", func(t *testing.T) {
		s := newStreamFollowUps(t, dest)
		var ths []streamThread
		var ids []string
		for i := range 4 {
			th := s.open(fmt.Sprintf("Cannot sign in %d", i))
			ths = append(ths, th)
			ids = append(ids, th.ids()...)
		}
		if f := s.esm(t, s.records(t, ids...)); len(f) != 0 {
			t.Errorf("batch item failures %v, want none", f)
		}
		for _, th := range ths {
			s.checkDelivered(t, th, followUpGap)
		}
		steps := s.steps(t)
		waited := 0
		for _, th := range ths {
			for _, id := range th.followUps {
				waited += min(steps[id]["waiting"], 1)
			}
		}
		if waited == 0 {
			t.Errorf("no follow-up's record was stepped before its predecessor was delivered; the test shows no moving on:\n%s", s.logs)
		}
		t.Logf("%d of %d follow-ups waited for their predecessors and were moved on to", waited, 3*len(ths))
		if moved := s.sweep(t); moved != 0 {
			t.Errorf("the sweep after the stream moved %d records on, want 0: the stream finished them", moved)
		}
		for _, th := range ths {
			s.checkDelivered(t, th, 0)
		}
	})

	// The same with the scheduled sweep running beside the stream, and the
	// stream handing every record over twice (it delivers at least once):
	// each record is delivered once, at its first attempt, in order.
	t.Run("stream, its redelivery and the sweep", func(t *testing.T) {
		s := newStreamFollowUps(t, dest)
		var ths []streamThread
		var ids []string
		for i := range 4 {
			th := s.open(fmt.Sprintf("VPN down %d", i))
			ths = append(ths, th)
			ids = append(ids, th.ids()...)
		}
		recs := s.records(t, ids...)
		done := make(chan struct{})
		var swept sync.WaitGroup
		swept.Go(func() {
			for {
				s.sweep(t)
				select {
				case <-done:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if f := s.esm(t, recs); len(f) != 0 {
					t.Errorf("batch item failures %v, want none", f)
				}
			})
		}
		wg.Wait()
		close(done)
		swept.Wait()
		for _, th := range ths {
			s.checkDelivered(t, th, followUpGap)
		}
		// Every line names its record's kind, the redelivered records'
		// not_claimed lines included.
		if n := s.steps(t); len(n) != len(ids) {
			t.Errorf("step lines for %d records, want %d", len(n), len(ids))
		}
	})

	// A comment's record, and its close's, handed over before the
	// ticket's: each waits (pending, no attempt counted, nothing sent, no
	// batch item failure); the ticket's record then delivers the ticket
	// and, in the same invocation, moves on to the comment and the close.
	t.Run("a follow-up's record before its ticket's", func(t *testing.T) {
		s := newStreamFollowUps(t, dest)
		ticket := s.env.Create(`{"title":"Printer on fire"}`)
		th := streamThread{ticket: ticket, followUps: []string{
			s.env.Comment(ticket, "Smoke is grey."),
			s.env.CloseTicket(ticket, "Extinguished."),
		}}
		recs := s.records(t, th.ids()...)
		byID := map[string]events.DynamoDBEventRecord{}
		for _, r := range recs {
			byID[strings.TrimPrefix(r.Change.Keys[dynamo.PartitionKey].String(), "TICKET#")] = r
		}
		for _, id := range th.followUps {
			if f := s.invoke(t, []events.DynamoDBEventRecord{byID[id]}); len(f) != 0 {
				t.Errorf("%s before its ticket: batch item failures %v, want none", id, f)
			}
			r := s.env.Record(id)
			if r.State != delivery.StatePending || r.Attempts != 0 || !r.DueAt.After(time.Now()) || !strings.Contains(r.Error, "waiting for") {
				t.Errorf("%s before its ticket: %+v; want pending, waiting, no attempt", id, r)
			}
		}
		if got := s.fake.Order(ticket); len(got) != 0 {
			t.Fatalf("the helpdesk holds %v before the ticket's record came", got)
		}
		if f := s.invoke(t, []events.DynamoDBEventRecord{byID[ticket]}); len(f) != 0 {
			t.Errorf("the ticket's record: batch item failures %v, want none", f)
		}
		s.checkDelivered(t, th, followUpGap)
		steps := s.steps(t)
		for _, id := range th.followUps {
			if steps[id]["waiting"] != 1 || steps[id]["delivered"] != 1 {
				t.Errorf("%s: step lines %v; want one waiting, then one delivered", id, steps[id])
			}
		}
	})
}
