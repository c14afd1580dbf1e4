package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/emftest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// deliveryFromEnv is the delivery function's start: the configuration
// from vars, then the composition root.
func deliveryFromEnv(vars map[string]string, log *slog.Logger) (*deliverylambda.Handler, error) {
	cfg, err := config.DeliveryFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		return nil, err
	}
	return Handler(context.Background(), cfg, log, nil)
}

// TestDeliveryHandlerReadsTheParameterOnce: with DELIVERY_SECRET_PARAMETER
// and DELIVERY_SECRET both set, the credentials come from the SSM
// parameter, read once at start; the handler delivers with them, and
// neither the token from SSM nor the one from the environment is logged.
func TestDeliveryHandlerReadsTheParameterOnce(t *testing.T) {
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
	h, err := deliveryFromEnv(vars, slog.New(slog.NewJSONHandler(logs, nil)))
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

// TestDeliveryHandlerRefuses: no table, no destination, or a parameter SSM
// does not have stop the function at start with an error naming the
// setting.
func TestDeliveryHandlerRefuses(t *testing.T) {
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
			_, err := deliveryFromEnv(c.vars, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "SECRET-VALUE") {
				t.Errorf("error %v, want one naming %s and no credential", err, c.want)
			}
		})
	}
}

// TestDeliveryHandlerMetricsNamespace: the delivery function's metrics go
// under METRICS_NAMESPACE; a namespace CloudWatch would refuse stops it at
// start.
func TestDeliveryHandlerMetricsNamespace(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	table := testenv.CreateTable(t, endpoint)
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	testenv.IsolatedAWSEnv(t, map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": endpoint})
	fc := fake.Config()
	vars := map[string]string{"TABLE_NAME": table, "DELIVERY_KIND": "zendesk", "DELIVERY_URL": fake.URL(),
		"DELIVERY_SECRET": `{"email":"` + fc.Email + `","token":"` + fc.Token + `"}`, "METRICS_NAMESPACE": "Acme/Helpdesk"}
	logs := &testenv.Buffer{}
	h, err := deliveryFromEnv(vars, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(context.Background(), json.RawMessage(`{"detail-type":"Scheduled Event"}`)); err != nil {
		t.Fatal(err)
	}
	_, data := emftest.Lines(t, logs.String())
	if len(data) != 1 || len(data[0]) != 1 || data[0][0].Namespace != "Acme/Helpdesk" || data[0][0].Key() != "tickets_waiting{}" || data[0][0].Values[0] != 0 {
		t.Fatalf("sweep metrics %+v, want tickets_waiting 0 under Acme/Helpdesk\n%s", data, logs.String())
	}

	vars["METRICS_NAMESPACE"] = "AWS/Lambda"
	if _, err := deliveryFromEnv(vars, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "METRICS_NAMESPACE") {
		t.Fatalf("DeliveryHandler with a reserved namespace: %v, want an error naming METRICS_NAMESPACE", err)
	}
}
