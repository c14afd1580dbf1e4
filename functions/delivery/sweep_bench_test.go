package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/benchtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// sweepBacklog is how many due tickets the drain benchmark starts from.
const sweepBacklog = 300

// BenchmarkDeliverySweepDrain: sweepBacklog tickets wait due on DynamoDB
// Local (as after a helpdesk outage, or an operator's bulk retry) and one
// scheduled sweep of the delivery function's handler, as deployed (the
// default sweep concurrency, lease and 10 s call timeout, its context
// ending at template.yaml's Timeout), delivers them through the Zendesk
// adapter to the fake helpdesk answering each create after the
// sub-benchmark's delay. Reports the tickets delivered by that one
// invocation, how long it ran, and the drain rate in tickets per minute.
// Each iteration is a fresh backlog; run it with -benchtime 1x.
func BenchmarkDeliverySweepDrain(b *testing.B) {
	endpoint := testenv.DynamoDB(b)
	client := testenv.DynamoClient(b, endpoint)
	timeout, err := strconv.Atoi(fmt.Sprint(plainAt(b, "Resources", "DeliveryFunction", "Properties", "Timeout")))
	if err != nil {
		b.Fatalf("template.yaml: DeliveryFunction Timeout: %v", err)
	}
	invocation := time.Duration(timeout) * time.Second
	for _, delay := range []time.Duration{benchtest.HelpdeskDelay, 1500 * time.Millisecond} {
		b.Run("create="+delay.String(), func(b *testing.B) {
			fake, dst := slowZendesk(b, delay)
			var delivered, seconds float64
			for range b.N {
				b.StopTimer()
				table := testenv.CreateTable(b, endpoint)
				store := dynamo.New(client, table, dynamo.Options{})
				run, n := time.Now().UnixNano(), 0
				svc := deliverytest.NewService(store, true, func() string { n++; return fmt.Sprintf("sw-%d-%d", run, n) })
				for i := range sweepBacklog {
					out := svc.Answer(context.Background(), core.Call{Function: core.CreateTicket, Content: json.RawMessage(`{"title":"backlog"}`),
						ExternalUserID: deliverytest.User, RequestID: fmt.Sprintf("sw%d-%d", run, i)})
					if out.Kind != core.KindCreated {
						b.Fatalf("create: %v %v", out.Kind, out.Err)
					}
				}
				h := deliveryHandler(delivery.Engine{Lease: delivery.LeaseFor(delivery.DefaultCallTimeout)}, store, dst)
				ctx, cancel := context.WithTimeout(context.Background(), invocation)
				b.StartTimer()
				start := time.Now()
				res, err := h.Sweep(ctx)
				elapsed := time.Since(start)
				b.StopTimer()
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if fake.Total() > 0 && res.Moved == 0 {
					b.Fatal("the sweep moved nothing")
				}
				delivered += float64(res.Moved)
				seconds += elapsed.Seconds()
			}
			if got := fake.Requests(fakehelpdesk.ZendeskCreate); got != int(delivered) {
				b.Fatalf("%d creates for %g tickets delivered", got, delivered)
			}
			b.ReportMetric(delivered/float64(b.N), "delivered/invocation")
			b.ReportMetric(seconds/float64(b.N), "invocation-s")
			b.ReportMetric(delivered/seconds*60, "tickets/min")
		})
	}
}

// plainAt reads a scalar of template.yaml along path.
func plainAt(b testing.TB, path ...string) any {
	b.Helper()
	v := plain(testenv.Template(b))
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			b.Fatalf("template.yaml: %v: not a mapping at %q", path, k)
		}
		v = m[k]
	}
	return v
}
