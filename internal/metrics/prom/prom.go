// Package prom is the local server's metrics.Recorder: the same metric
// and label names as the Lambda's Embedded Metric Format, in Prometheus's
// text format on GET /metrics.
package prom

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// Recorder holds the product's collectors in its own registry, with the
// Go runtime and process collectors beside them.
type Recorder struct {
	reg       *prometheus.Registry
	callbacks *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	store     prometheus.Histogram
	cold      prometheus.Counter
	delivered *prometheus.CounterVec
	lag       prometheus.Histogram
	waiting   prometheus.Gauge
	readAhead *prometheus.CounterVec
	served    atomic.Bool
	cl        metrics.CallbackLabels
	dl        metrics.DeliveryLabels
}

var _ metrics.Recorder = (*Recorder)(nil)

// New builds a Recorder with its registry, for labels from the closed
// sets c and d (given by the composition root).
func New(c metrics.CallbackLabels, d metrics.DeliveryLabels) *Recorder {
	r := &Recorder{
		cl:  c,
		dl:  d,
		reg: prometheus.NewRegistry(),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.Callbacks, Help: "Requests by door, function, outcome and rejection code.",
		}, []string{metrics.LabelDoor, metrics.LabelFunction, metrics.LabelOutcome, metrics.LabelCode}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: metrics.CallbackDuration, Help: "Time from a request's arrival to its log line.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{metrics.LabelDoor, metrics.LabelFunction, metrics.LabelOutcome}),
		store: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: metrics.StoreCallDuration, Help: "Time of each store call (transaction, ticket or user read).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		cold: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metrics.ColdStarts, Help: "First requests served by a process.",
		}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metrics.Deliveries, Help: "Recorded delivery steps by result: delivered, failed, unknown, retried (back to pending for another attempt), misconfigured (the destination refused our credentials or URL; back to pending) or waiting (a follow-up waits for its ticket or the one before it); and by kind (ticket, comment, close, other).",
		}, []string{metrics.LabelState, metrics.LabelKind}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: metrics.DeliveryLag, Help: "Time from a ticket's commit to its delivery.",
			Buckets: []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metrics.TicketsWaiting,
			Help: "Tickets waiting to be delivered when the worker last counted: pending (due, or backing off before a retry) or being delivered under a lease; not the failed or unknown ones.",
		}),
	}
	r.readAhead = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metrics.ReadAheadErrors, Help: "Claim read-aheads that failed, by class: access_denied, throttled, timeout, other (the transaction answered instead).",
	}, []string{metrics.LabelClass})
	for _, c := range metrics.ReadAheadClasses {
		r.readAhead.WithLabelValues(c)
	}
	r.reg.MustRegister(r.callbacks, r.duration, r.store, r.cold, r.delivered, r.lag, r.waiting, r.readAhead,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every state shows from the start, at zero, so a rate or an alert on
	// "unknown" has a series before the first one happens.
	for _, s := range d.States {
		for _, k := range d.KindLabels() {
			r.delivered.WithLabelValues(s, k)
		}
	}
	return r
}

// Handler serves the registry in the text format.
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Registry is the recorder's registry (tests gather from it).
func (r *Recorder) Registry() *prometheus.Registry { return r.reg }

// Callback counts the request and observes its duration.
func (r *Recorder) Callback(_ context.Context, c metrics.Callback) slog.Attr {
	fn, outcome, code := r.cl.Of(c)
	door := c.DoorLabel()
	r.callbacks.WithLabelValues(door, fn, outcome, code).Inc()
	r.duration.WithLabelValues(door, fn, outcome).Observe(c.Duration.Seconds())
	if !r.served.Swap(true) {
		r.cold.Inc()
	}
	return slog.Attr{}
}

// StoreCall observes one store call.
func (r *Recorder) StoreCall(_ context.Context, d time.Duration) {
	r.store.Observe(d.Seconds())
}

// Delivery counts the attempt's end by state and observes the lag of a
// delivered ticket. A state outside the delivery labels' States is refused.
func (r *Recorder) Delivery(_ context.Context, d metrics.DeliveryStep) slog.Attr {
	if err := r.dl.Check(d); err != nil {
		return slog.String("metrics_error", err.Error())
	}
	r.delivered.WithLabelValues(d.State, r.dl.KindOf(d)).Inc()
	if d.State == r.dl.Delivered {
		r.lag.Observe(d.Lag.Seconds())
	}
	return slog.Attr{}
}

// TicketsWaiting sets the gauge.
func (r *Recorder) TicketsWaiting(_ context.Context, n int) slog.Attr {
	r.waiting.Set(float64(n))
	return slog.Attr{}
}

// ReadAheadError counts one failed read-ahead by class.
func (r *Recorder) ReadAheadError(_ context.Context, class string) slog.Attr {
	r.readAhead.WithLabelValues(metrics.ReadAheadClass(class)).Inc()
	return slog.Attr{}
}
