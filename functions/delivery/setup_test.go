package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/benchtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// slowZendesk is the Zendesk adapter on a fake helpdesk that answers every
// create after delay.
func slowZendesk(b *testing.B, delay time.Duration) (*fakehelpdesk.Server, *zendesk.Client) {
	b.Helper()
	fake := fakehelpdesk.New(b, fakehelpdesk.Config{})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, Times: 1 << 30, Fault: fakehelpdesk.Fault{Delay: delay}})
	fc := fake.Config()
	dst, err := zendesk.New(zendesk.Config{URL: fake.URL(), Email: fc.Email, Token: fc.Token})
	if err != nil {
		b.Fatal(err)
	}
	return fake, dst
}

// deliveryHandler is the delivery function's handler over store and dst,
// its metrics in Embedded Metric Format, its logs discarded.
func deliveryHandler(engine delivery.Engine, store delivery.Outbox, dst delivery.Destination) *deliverylambda.Handler {
	return deliverylambda.Options{Engine: engine, Store: store, Destination: dst,
		Log: slog.New(slog.DiscardHandler), Metrics: &metrics.EMF{DeliveryLabels: destination.MetricLabels()}}.Handler()
}

// streamRig is a stream-enabled table on DynamoDB Local and the delivery
// handler, as deployed, over it, timing each delivery, sending to a fake
// helpdesk that answers every create after benchtest.HelpdeskDelay.
type streamRig struct {
	endpoint, streamARN string
	store               *dynamo.Store
	fake                *fakehelpdesk.Server
	timed               *benchtest.DeliveryTimer
	h                   *deliverylambda.Handler
	dst                 *zendesk.Client // the adapter h sends through
}

func newStreamRig(b *testing.B) streamRig {
	b.Helper()
	r := streamRig{endpoint: testenv.DynamoDB(b)}
	client := testenv.DynamoClient(b, r.endpoint)
	var table string
	table, r.streamARN = streamTable(b, r.endpoint)
	r.store = dynamo.New(client, table, dynamo.Options{})
	r.fake, r.dst = slowZendesk(b, benchtest.HelpdeskDelay)
	r.timed = benchtest.NewDeliveryTimer(r.store)
	r.h = deliveryHandler(delivery.Engine{}, r.timed, r.dst)
	return r
}
