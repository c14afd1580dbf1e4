//go:build linux

package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/emftest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/otlptest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// freezePause is how long the bootstrap stays stopped between two
// invocations: seconds, as a Lambda environment idles between calls.
const freezePause = 3 * time.Second

// TestFrozenBetweenInvocations runs the built delivery bootstrap under
// the Lambda emulator as Lambda runs it: frozen (SIGSTOP) as soon as each
// answer is out and thawed (SIGCONT) only just before the next
// invocation, freezePause later. The invocations: a stream batch of two
// pending tickets, a scheduled sweep finding a third left behind, and the
// stream's redelivery of the first batch. While the bootstrap is frozen,
// each invocation must already show everything it owes: its answer, each
// ticket held once by the helpdesk and recorded delivered, its lines with
// their EMF metrics (one per delivery step, and the sweep's count of
// waiting tickets), and its spans (exported to a loopback OTLP receiver),
// all started after the invocation was sent and ended before its answer
// came back. Nothing appears after the last answer.
func TestFrozenBetweenInvocations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstraps and starts DynamoDB Local and the RIE")
	}
	endpoint, table, streamARN, store := rieTable(t)
	ctx := context.Background()
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{Email: email, Token: token})
	rc := otlptest.Start(t)
	secret, _ := json.Marshal(map[string]string{"email": email, "token": token})
	rie := startDeliveryRuntime(t, endpoint, table, map[string]string{
		"DELIVERY_KIND":               "zendesk",
		"DELIVERY_URL":                fake.URL(),
		"DELIVERY_SECRET":             string(secret),
		"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL,
	})

	ids := createThroughCallback(t, startCallback(t, endpoint, table), 2)
	batch := pendingInserts(t, endpoint, streamARN, ids)
	schedule, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "events", "delivery-schedule.json"))
	if err != nil {
		t.Fatal(err)
	}
	var left string // the ticket the stream left behind, for the sweep

	delivered := func(t *testing.T, id string) {
		t.Helper()
		if h := fake.Held(id); h != 1 {
			t.Errorf("helpdesk holds %d tickets for %s, want 1", h, id)
		}
		if r, err := store.Delivery(ctx, id); err != nil || r.State != delivery.StateDelivered || r.ExternalID == "" {
			t.Errorf("%s: %+v %v; want delivered with the helpdesk's id", id, r, err)
		}
	}
	type invocation struct {
		name  string
		event func() []byte
		check func(t *testing.T, answer []byte)
		// metrics: the sums of the EMF data of the invocation's lines,
		// but for delivery_lag_seconds, which must be there (above zero)
		// when a ticket was delivered.
		metrics map[string]float64
	}
	invocations := []invocation{
		{"stream batch", func() []byte { return batch }, func(t *testing.T, answer []byte) {
			if f := batchFailures(t, answer); len(f) != 0 {
				t.Errorf("batch item failures %v", f)
			}
			for _, id := range ids {
				delivered(t, id)
			}
		}, map[string]float64{"deliveries_total{state=delivered}": 2, "deliveries_total{kind=ticket,state=delivered}": 2}},
		{"sweep", func() []byte {
			env := deliverytest.NewEnv(t, store, true)
			// Created a second ago on the real clock the function reads, so
			// its delivery lag is above zero (NewEnv's clock may start a
			// fraction of a second ahead of it).
			env.Now = time.Now().Add(-time.Second)
			left = env.Create(`{"title":"Left behind by the stream"}`)
			env.Release(left, time.Now().Add(-time.Minute)) // pending, due in the past
			return schedule
		}, func(t *testing.T, answer []byte) {
			var res struct {
				Moved int `json:"moved"`
			}
			if err := json.Unmarshal(answer, &res); err != nil || res.Moved != 1 {
				t.Errorf("sweep answered %s (%v), want moved 1", answer, err)
			}
			delivered(t, left)
		}, map[string]float64{"deliveries_total{state=delivered}": 1, "deliveries_total{kind=ticket,state=delivered}": 1, "tickets_waiting{}": 0}},
		{"stream batch again", func() []byte { return batch }, func(t *testing.T, answer []byte) {
			if f := batchFailures(t, answer); len(f) != 0 {
				t.Errorf("batch item failures %v", f)
			}
			for _, id := range ids {
				delivered(t, id)
			}
		}, map[string]float64{}},
	}

	frozen := 0 // the stopped bootstrap's pid; 0 before the first invocation
	seen := 0   // spans received before this invocation
	for i, inv := range invocations {
		ev := inv.event()
		if frozen != 0 {
			rie.Thaw(t, frozen)
		}
		mark := len(rie.Out.String())
		sent := time.Now()
		answer, err := testenv.InvokeErr(rie.URL, ev)
		answered := time.Now()
		if err != nil {
			t.Fatalf("%s: %v\n%s", inv.name, err, rie.Out)
		}
		frozen = rie.Freeze(t)
		t.Run(inv.name, func(t *testing.T) {
			inv.check(t, answer)
			// The invocation's lines are out: the bootstrap is stopped, so
			// what it wrote is in the emulator's pipe (which may still be
			// copying it) up to the runtime's END line.
			out := rie.Out.Await(func(s string) bool { return strings.Count(s, "END RequestId:") > i }, 5*time.Second)[mark:]
			got := emfSums(t, out)
			if lag, want := got["delivery_lag_seconds{}"], inv.metrics["deliveries_total{state=delivered}"] > 0; (lag > 0) != want {
				t.Errorf("delivery_lag_seconds %v; want it when a ticket was delivered", lag)
			}
			delete(got, "delivery_lag_seconds{}")
			if !maps.Equal(got, inv.metrics) {
				t.Errorf("EMF sums of the invocation's lines:\n got %v\nwant %v\n%s", got, inv.metrics, out)
			}
			spans, _ := rc.Snapshot()
			mine := spans[seen:]
			seen = len(spans)
			if len(mine) == 0 {
				t.Error("no span exported before the answer")
			}
			for _, s := range otlptest.Outside(mine, sent, answered) {
				t.Errorf("span %s [%s] ran outside the invocation: work of another invocation, or after the answer", s.GetName(), otlptest.ID(s))
			}
		})
		if i < len(invocations)-1 {
			time.Sleep(freezePause)
		}
	}
	// Thawed once more, the bootstrap has nothing left to do.
	before := rie.Out.String()
	rie.Thaw(t, frozen)
	time.Sleep(time.Second)
	if extra := strings.TrimPrefix(rie.Out.String(), before); strings.Contains(extra, "{") {
		t.Errorf("the bootstrap wrote after its last answer:\n%s", extra)
	}
	if spans, _ := rc.Snapshot(); len(spans) != seen {
		t.Errorf("%d spans exported after the last answer", len(spans)-seen)
	}
	if got := fake.Requests(fakehelpdesk.ZendeskCreate); got != 3 {
		t.Errorf("helpdesk received %d creates, want 3: nothing is sent twice", got)
	}
	if t.Failed() {
		t.Logf("RIE and bootstrap output:\n%s", rie.Out)
	}
}

// emfSums adds up the EMF data of the function's lines in out (the
// emulator's own lines are not JSON and are skipped); each line with
// metrics must carry an invocation's requestId.
func emfSums(t *testing.T, out string) map[string]float64 {
	t.Helper()
	var all []emftest.Datum
	for line := range strings.Lines(out) {
		data, err := emftest.Parse([]byte(line))
		if err != nil || len(data) == 0 {
			continue
		}
		var l struct {
			RequestID string `json:"requestId"`
		}
		if json.Unmarshal([]byte(line), &l); l.RequestID == "" {
			t.Errorf("a line with metrics and no requestId: %s", line)
		}
		all = append(all, data...)
	}
	return emftest.Sum(all)
}
