package deliverylambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/emftest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

const testNamespace = "AIVAX/DeliveryTest"

// TestDeliveryMetricsEMF: a delivered, a failed, an unknown and a retried
// ticket, from one stream batch through the real handler on DynamoDB
// Local with the fake helpdesk, then a scheduled sweep. Each step's one
// log line carries its metrics; the sweep's line carries the tickets
// still waiting. Read back as CloudWatch would, they add up to exactly the
// expected counts, the lag of the delivered ticket, and the waiting
// gauge; the only dimension is the state, from its closed set, never a
// ticket id, tenant, user, key or credential.
func TestDeliveryMetricsEMF(t *testing.T) {
	f := newFixture(t, nil)
	e := f.env
	now := e.Now.Add(2500 * time.Millisecond) // the worker comes 2.5 s after the commits
	recorder := &metrics.EMF{Namespace: testNamespace, Now: func() time.Time { return now }, DeliveryLabels: destination.MetricLabels()}
	h := deliverylambda.NewWithMetrics(delivery.Engine{MaxAttempts: 2, MaxLookups: 1, Lease: delivery.LeaseFor(2 * time.Second),
		Now: func() time.Time { return now }}, f.store, zendeskFor(t, f.fake), slog.New(slog.NewJSONHandler(f.logs, nil)), recorder)

	delivered := e.Create(`{"title":"Printer on fire"}`)
	failed := e.Create(`{"title":"Refused by the helpdesk"}`)
	retried := e.Create(`{"title":"Helpdesk busy"}`)
	unknown := e.Create(`{"title":"Lost in the gateway"}`)
	waiting := e.Create(`{"title":"Backing off"}`)
	e.ReleaseUnknown(unknown, now.Add(-time.Minute)) // one send made already, its outcome unknown
	e.Release(waiting, now.Add(time.Hour))
	f.fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, Key: failed, Fault: fakehelpdesk.Refuse(422)})
	f.fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, Key: retried, Fault: fakehelpdesk.TooManyRequests("3600")})
	f.fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskLookup, Key: unknown, Fault: fakehelpdesk.Fault{Status: 500}})

	mark := len(f.logs.String())
	ev := batch(t, rec{"1", "INSERT", f.image(t, "TICKET#"+delivered)}, rec{"2", "INSERT", f.image(t, "TICKET#"+failed)},
		rec{"3", "INSERT", f.image(t, "TICKET#"+retried)}, rec{"4", "MODIFY", f.image(t, "TICKET#"+unknown)})
	if out, err := h.Handle(context.Background(), ev); err != nil || len(failures(t, out)) != 0 {
		t.Fatalf("stream: %v %v", out, err)
	}
	for id, want := range map[string]delivery.State{delivered: delivery.StateDelivered, failed: delivery.StateFailed,
		retried: delivery.StatePending, unknown: delivery.StateUnknown, waiting: delivery.StatePending} {
		if got := e.Record(id).State; got != want {
			t.Fatalf("ticket %s is %s, want %s", id, got, want)
		}
	}
	out, err := h.Handle(context.Background(), json.RawMessage(`{"detail-type":"Scheduled Event"}`))
	if err != nil || out.(deliverylambda.SweepResult).Moved != 0 {
		t.Fatalf("sweep: %v %v, want nothing due", out, err)
	}

	logs := f.logs.String()[mark:]
	lines, data := emftest.Lines(t, logs)
	var all []emftest.Datum
	byMsg := map[string]int{}
	for i, d := range data {
		all = append(all, d...)
		byMsg[fmt.Sprint(lines[i]["msg"])]++
	}
	if byMsg["delivery"] != 4 || byMsg["delivery sweep"] != 1 || len(lines) != 5 {
		t.Errorf("lines with metrics by message %v, want 4 delivery steps and 1 sweep", byMsg)
	}
	want := map[string]float64{
		"deliveries_total{state=delivered}": 1,
		"deliveries_total{state=failed}":    1,
		"deliveries_total{state=unknown}":   1,
		"deliveries_total{state=retried}":   1,
		// The same steps by kind, all of them tickets'.
		"deliveries_total{kind=ticket,state=delivered}": 1,
		"deliveries_total{kind=ticket,state=failed}":    1,
		"deliveries_total{kind=ticket,state=unknown}":   1,
		"deliveries_total{kind=ticket,state=retried}":   1,
		"delivery_lag_seconds{}":                        2.5,
		"tickets_waiting{}":                             2, // the retried ticket and the one backing off
	}
	if got := emftest.Sum(all); !maps.Equal(got, want) {
		t.Errorf("EMF sums:\n got %v\nwant %v\n%s", got, want, logs)
	}
	// Each step line names its own ticket as a member and its state as
	// the one dimension.
	for i, l := range lines {
		if l["msg"] != "delivery" {
			continue
		}
		id, _ := l["id"].(string)
		wantState := map[string]string{delivered: "delivered", failed: "failed", retried: "retried", unknown: "unknown"}[id]
		if wantState == "" || l["state"] != wantState {
			t.Errorf("step line for %q has state %v, want %q", id, l["state"], wantState)
		}
		for _, d := range data[i] {
			if d.Namespace != testNamespace {
				t.Errorf("namespace %q, want %q", d.Namespace, testNamespace)
			}
		}
	}
	secrets := []string{delivered, failed, retried, unknown, waiting, "tenant-a", "alice", "user-a", token}
	for _, id := range []string{delivered, failed, retried, unknown} {
		var item struct {
			OperationKey struct{ S string } `json:"operation_key"`
		}
		if err := json.Unmarshal(f.image(t, "TICKET#"+id), &item); err != nil || len(item.OperationKey.S) != 64 {
			t.Fatalf("operation key of %s: %v %q", id, err, item.OperationKey.S)
		}
		secrets = append(secrets, item.OperationKey.S)
	}
	for _, d := range all {
		for name, v := range d.Dimensions {
			allowed := map[string][]string{metrics.LabelState: destination.MetricLabels().States,
				metrics.LabelKind: destination.MetricLabels().KindLabels()}[name]
			if !slices.Contains(allowed, v) {
				t.Errorf("%s: dimension %s=%q; only state from %v and kind from %v are allowed", d.Name, name, v,
					destination.MetricLabels().States, destination.MetricLabels().KindLabels())
			}
			for _, s := range secrets {
				if s != "" && strings.Contains(v, s) {
					t.Errorf("%s: dimension %s carries %q", d.Name, name, s)
				}
			}
		}
	}
	if strings.Contains(logs, token) {
		t.Errorf("the token is in the logs")
	}
}

// TestResultsAreTheMetricStates: the engine's step results are exactly
// the state label's values, so every step is counted under its own name.
func TestResultsAreTheMetricStates(t *testing.T) {
	var got []string
	for _, r := range delivery.Results {
		got = append(got, string(r))
	}
	if !slices.Equal(got, destination.MetricLabels().States) {
		t.Fatalf("delivery.Results %v, destination.MetricLabels().States %v", got, destination.MetricLabels().States)
	}
}

// TestSweepCountsOnce: the scheduled sweep counts the waiting tickets with
// one call per run (a Query that counts on the index of live deliveries),
// beside the one that finds the due tickets; the stream never counts
// (TestStreamCallsPerTicket).
func TestSweepCountsOnce(t *testing.T) {
	f, counted, calls := countingFixture(t)
	env := f.env
	for range 3 {
		env.Release(env.Create(`{"title":"Backing off"}`), time.Now().Add(time.Hour))
	}
	logs := &testenv.Buffer{}
	h := deliverylambda.New(delivery.Engine{}, counted, zendeskFor(t, fakehelpdesk.New(t, fakehelpdesk.Config{})), slog.New(slog.NewJSONHandler(logs, nil)))
	if _, err := h.Handle(context.Background(), json.RawMessage(`{"detail-type":"Scheduled Event"}`)); err != nil {
		t.Fatal(err)
	}
	if got := calls.Load(); got != 2 {
		t.Errorf("%d DynamoDB calls for a sweep with nothing due, want 2 (find due, count waiting)", got)
	}
	_, data := emftest.Lines(t, logs.String())
	if len(data) != 1 || emftest.Sum(data[0])["tickets_waiting{}"] != 3 {
		t.Errorf("sweep metrics %+v, want tickets_waiting 3", data)
	}
}
