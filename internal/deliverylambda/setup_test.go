package deliverylambda_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/delivery/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testenv"
)

// TestFromEnvReadsTheParameterOnce: with DELIVERY_SECRET_PARAMETER and
// DELIVERY_SECRET both set, the credentials come from the SSM parameter,
// read once at start; the handler delivers with them, and neither the
// token from SSM nor the one from the environment is logged.
func TestFromEnvReadsTheParameterOnce(t *testing.T) {
	const ssmToken, envToken = "TOKEN-FROM-SSM", "TOKEN-FROM-ENV"
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{Email: "agent@acme.com", Token: ssmToken})
	var asked atomic.Int32
	ssmURL := testenv.FakeSSM(t, "/aivax/delivery", `{"email":"agent@acme.com","token":"`+ssmToken+`"}`, &asked)
	testenv.IsolatedAWSEnv(t, map[string]string{"AWS_ENDPOINT_URL_SSM": ssmURL, "AWS_ENDPOINT_URL_DYNAMODB": endpoint})
	vars := map[string]string{
		"TABLE_NAME": table, "DELIVERY_KIND": "zendesk", "DELIVERY_URL": fake.URL(),
		"DELIVERY_SECRET_PARAMETER": "/aivax/delivery",
		"DELIVERY_SECRET":           `{"email":"agent@acme.com","token":"` + envToken + `"}`,
	}
	logs := &testenv.Buffer{}
	h, err := deliverylambda.FromEnv(context.Background(), func(k string) string { return vars[k] }, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	store := dynamo.New(testenv.DynamoClient(t, endpoint), table, dynamo.Options{})
	env := deliverytest.NewEnv(t, store, true)
	id := env.Create(`{"title":"Credentials from SSM"}`)
	env.Release(id, time.Now().Add(-time.Second))
	out, err := h.Handle(context.Background(), json.RawMessage(`{"detail-type":"Scheduled Event"}`))
	if err != nil || out.(deliverylambda.SweepResult).Moved != 1 {
		t.Fatalf("sweep: %v %v", out, err)
	}
	if fake.Held(id) != 1 || env.Record(id).State != delivery.StateDelivered {
		t.Errorf("ticket %s: helpdesk holds %d, state %s; want delivered with the SSM token", id, fake.Held(id), env.Record(id).State)
	}
	if asked.Load() != 1 {
		t.Errorf("SSM read %d times, want once", asked.Load())
	}
	if s := logs.String(); strings.Contains(s, ssmToken) || strings.Contains(s, envToken) || !strings.Contains(s, "delivery destination") {
		t.Errorf("logs show a token, or no start line:\n%s", s)
	}
}

// TestFromEnvRefuses: no table, no destination, or a parameter SSM does
// not have stop the function at start with an error naming the setting.
func TestFromEnvRefuses(t *testing.T) {
	var asked atomic.Int32
	testenv.IsolatedAWSEnv(t, map[string]string{"AWS_ENDPOINT_URL_SSM": testenv.FakeSSM(t, "/other", "{}", &asked)})
	for name, c := range map[string]struct {
		vars map[string]string
		want string
	}{
		"no table":        {map[string]string{"DELIVERY_KIND": "webhook"}, "TABLE_NAME"},
		"kind none":       {map[string]string{"TABLE_NAME": "t", "DELIVERY_KIND": "none"}, "DELIVERY_KIND"},
		"no parameter":    {map[string]string{"TABLE_NAME": "t", "DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://x.example/hook", "DELIVERY_SECRET_PARAMETER": "/missing"}, "DELIVERY_SECRET_PARAMETER /missing"},
		"bad secret kind": {map[string]string{"TABLE_NAME": "t", "DELIVERY_KIND": "webhook", "DELIVERY_URL": "https://x.example/hook", "DELIVERY_SECRET": `{"email":"a","token":"SECRET-VALUE"}`}, "webhook needs"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := deliverylambda.FromEnv(context.Background(), func(k string) string { return c.vars[k] }, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "SECRET-VALUE") {
				t.Errorf("error %v, want one naming %s and no credential", err, c.want)
			}
		})
	}
}

// TestStreamCallsPerTicket: delivering a pending ticket from the stream
// costs exactly two DynamoDB calls, the claim and the result.
func TestStreamCallsPerTicket(t *testing.T) {
	fx, counted, calls := countingFixture(t)
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	env := fx.env
	var recs []rec
	const n = 5
	for i := range n {
		id := env.Create(`{"title":"Count me"}`)
		recs = append(recs, rec{seq: string(rune('a' + i)), name: "INSERT", image: fx.image(t, "TICKET#"+id)})
	}
	dst := zendeskFor(t, fake)
	h := deliverylambda.New(delivery.Engine{}, counted, dst, slog.New(slog.DiscardHandler))
	calls.Store(0)
	out, err := h.Handle(context.Background(), batch(t, recs...))
	if err != nil || len(failures(t, out)) != 0 {
		t.Fatalf("%v %v", out, err)
	}
	if fake.Total() != n {
		t.Fatalf("helpdesk holds %d, want %d", fake.Total(), n)
	}
	if got := calls.Load(); got != 2*n {
		t.Errorf("%d DynamoDB calls for %d delivered tickets, want %d (claim and result)", got, n, 2*n)
	}
	t.Logf("a stream batch of %d pending tickets, delivered: %d DynamoDB requests", n, calls.Load()) // read back by make bench

	// Records the handler ignores cost nothing: the same tickets, now
	// delivered, and an item that is not a ticket.
	var ignored []rec
	for i, r := range recs {
		var img map[string]any
		if err := json.Unmarshal(r.image, &img); err != nil {
			t.Fatal(err)
		}
		ignored = append(ignored, rec{seq: fmt.Sprint("m", i), name: "MODIFY",
			image: fx.image(t, img["pk"].(map[string]any)["S"].(string))})
	}
	ignored = append(ignored, rec{seq: "u", name: "INSERT", image: json.RawMessage(`{"pk":{"S":"USER#x"},"delivery_state":{"S":"pending"}}`)})
	calls.Store(0)
	if out, err := h.Handle(context.Background(), batch(t, ignored...)); err != nil || len(failures(t, out)) != 0 {
		t.Fatalf("%v %v", out, err)
	}
	t.Logf("a stream batch of %d records that are not pending tickets: %d DynamoDB requests", len(ignored), calls.Load()) // read back by make bench
	if got := calls.Load(); got != 0 {
		t.Errorf("%d DynamoDB calls for records that are not pending tickets, want 0", got)
	}
}
