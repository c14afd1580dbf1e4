package prom_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/prom"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// TestDeliveries: the delivery API counts by state, observes the lag of
// delivered tickets only, sets tickets_waiting, and refuses a state
// outside the closed set without making it a label.
func TestDeliveries(t *testing.T) {
	r := prom.New(httpapi.MetricLabels(nil), destination.MetricLabels())
	ctx := context.Background()
	for _, d := range []metrics.DeliveryStep{
		{State: string(delivery.ResultDelivered), Kind: delivery.KindTicket, Lag: 2 * time.Second},
		{State: string(delivery.ResultDelivered), Kind: "comment", Lag: 4 * time.Second},
		{State: string(delivery.ResultRetried), Kind: delivery.KindTicket},
		{State: string(delivery.ResultUnknown), Kind: delivery.KindTicket},
		{State: string(delivery.ResultFailed), Kind: "close"},
		{State: string(delivery.ResultMisconfigured), Kind: delivery.KindTicket},
		{State: string(delivery.ResultWaiting), Kind: "a tool's own kind"},
	} {
		if a := r.Delivery(ctx, d); !a.Equal(slog.Attr{}) {
			t.Errorf("Delivery(%+v) returned %v; Prometheus adds nothing to the line", d, a)
		}
	}
	if a := r.Delivery(ctx, metrics.DeliveryStep{State: "0b6f7d0e-2f0a-4c61-9d4e-4a1f3c0f4b8e"}); a.Key != "metrics_error" ||
		strings.Contains(a.Value.String(), "0b6f7d0e") {
		t.Errorf("a state outside the set: %v, want a metrics_error that does not repeat it", a)
	}
	r.TicketsWaiting(ctx, 3)
	r.TicketsWaiting(ctx, 7)

	// Every state and kind shows from the start, at zero; a kind outside
	// the set counts as other.
	counted := map[[2]string]int{{"delivered", "ticket"}: 1, {"delivered", "comment"}: 1, {"retried", "ticket"}: 1,
		{"unknown", "ticket"}: 1, {"failed", "close"}: 1, {"misconfigured", "ticket"}: 1, {"waiting", "other"}: 1}
	var series []string
	for _, s := range destination.MetricLabels().States {
		for _, k := range destination.MetricLabels().KindLabels() {
			series = append(series, fmt.Sprintf("deliveries_total{kind=%q,state=%q} %d", k, s, counted[[2]string{s, k}]))
		}
	}
	slices.Sort(series)
	want := `
# HELP deliveries_total Recorded delivery steps by result: delivered, failed, unknown, retried (back to pending for another attempt), misconfigured (the destination refused our credentials or URL; back to pending) or waiting (a follow-up waits for its ticket or the one before it); and by kind (ticket, comment, close, other).
# TYPE deliveries_total counter
` + strings.Join(series, "\n") + `
# HELP tickets_waiting Tickets waiting to be delivered when the worker last counted: pending (due, or backing off before a retry) or being delivered under a lease; not the failed or unknown ones.
# TYPE tickets_waiting gauge
tickets_waiting 7
`
	if err := testutil.GatherAndCompare(r.Registry(), strings.NewReader(want), metrics.Deliveries, metrics.TicketsWaiting); err != nil {
		t.Error(err)
	}
	n, err := testutil.GatherAndCount(r.Registry(), metrics.DeliveryLag)
	if err != nil || n != 1 {
		t.Fatalf("delivery_lag_seconds: %d series, %v", n, err)
	}
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	_, b := testenv.Get(t, srv.URL)
	body := string(b)
	for _, want := range []string{"delivery_lag_seconds_count 2", "delivery_lag_seconds_sum 6", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestCallbackLabels: labels come from closed sets; a function name the
// catalogue does not know is an empty (absent) label, never the name, and
// a door other than mcp is the callback's.
func TestCallbackLabels(t *testing.T) {
	r := prom.New(httpapi.MetricLabels(nil), destination.MetricLabels())
	ctx := context.Background()
	r.Callback(ctx, metrics.Callback{Function: "Cannot sign in", Outcome: "rejected", Code: "unknown_function"})
	r.Callback(ctx, metrics.Callback{Function: "get_ticket", Outcome: "tenant-a", Code: "alice"})
	r.Callback(ctx, metrics.Callback{Door: "mcp", Function: "create_ticket", Outcome: "created"})
	r.Callback(ctx, metrics.Callback{Door: "user-a", Function: "create_ticket", Outcome: "created"})
	r.StoreCall(ctx, time.Millisecond)
	want := `
# HELP callbacks_total Requests by door, function, outcome and rejection code.
# TYPE callbacks_total counter
callbacks_total{code="",door="aivax",function="create_ticket",outcome="created"} 1
callbacks_total{code="",door="aivax",function="get_ticket",outcome="internal"} 1
callbacks_total{code="",door="mcp",function="create_ticket",outcome="created"} 1
callbacks_total{code="unknown_function",door="aivax",function="",outcome="rejected"} 1
# HELP cold_starts_total First requests served by a process.
# TYPE cold_starts_total counter
cold_starts_total 1
`
	if err := testutil.GatherAndCompare(r.Registry(), strings.NewReader(want), metrics.Callbacks, metrics.ColdStarts); err != nil {
		t.Error(err)
	}
}
