package deliverylambda

import (
	"log/slog"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// New returns the handler over store and destination, with its metrics in
// Embedded Metric Format under the default namespace (see
// NewWithMetrics). engine supplies the attempts, lease and backoff; its
// Store, Destination and Observer are replaced.
func New(engine delivery.Engine, store delivery.Outbox, dst delivery.Destination, log *slog.Logger) *Handler {
	return NewWithMetrics(engine, store, dst, log, NewRecorder())
}

// NewRecorder is the metrics recorder of the tests' handlers: Embedded
// Metric Format under the default namespace, with the product's delivery
// labels.
func NewRecorder() *metrics.EMF {
	return &metrics.EMF{DeliveryLabels: destination.MetricLabels()}
}

// NewWithMetrics is New with the metrics recorder: each recorded step is
// logged in one line that also carries its metrics (rec.Delivery), and the
// scheduled sweep's line carries the count of waiting tickets
// (rec.TicketsWaiting).
func NewWithMetrics(engine delivery.Engine, store delivery.Outbox, dst delivery.Destination, log *slog.Logger, rec metrics.Recorder) *Handler {
	return Options{Engine: engine, Store: store, Destination: dst, Log: log, Metrics: rec}.Handler()
}
