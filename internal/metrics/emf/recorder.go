package emf

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

// DefaultNamespace is the CloudWatch namespace when none is configured
// (template.yaml's MetricsNamespace parameter sets it).
const DefaultNamespace = "AIVAX/Callback"

// Recorder is the Lambda's metrics.Recorder: each method returns the EMF
// members for the line that reports the event, and the function's one JSON
// log line per request becomes its metrics. It makes no call of its own.
type Recorder struct {
	Namespace string           // DefaultNamespace when empty
	Now       func() time.Time // time.Now when nil
	served    atomic.Bool      // a request was served: later ones are warm
}

var _ metrics.Recorder = (*Recorder)(nil)

// Dimension sets. The callback's sets name the line's own function, outcome
// and code members; an empty set also records the metric without
// dimensions (the totals the alarms divide by).
var (
	setsAll          = []string{}
	setOutcome       = []string{metrics.LabelOutcome}
	setFnOutcome     = []string{metrics.LabelFunction, metrics.LabelOutcome}
	setOutcomeCode   = []string{metrics.LabelOutcome, metrics.LabelCode}
	setState         = []string{metrics.LabelState}
	noDimensions     = [][]string{setsAll}
	deliveryStateSet = [][]string{setState}
)

// Callback returns the request's metrics: callbacks_total and
// callback_duration_seconds by outcome (and function, and code when they
// are present), store_call_duration_seconds for each store call collected
// under ctx, and cold_starts_total on the process's first request. The
// dimensions are the line's own "function", "outcome" and "code" members
// (internal/httpapi writes them), so they are not written again; a value
// outside its closed set (a function name the catalogue does not know) is
// left out of the dimension sets, never made a dimension.
func (r *Recorder) Callback(ctx context.Context, c metrics.Callback) slog.Attr {
	fn, outcome, code := c.Labels()
	counts := make([][]string, 0, 4)
	durations := make([][]string, 0, 3)
	counts = append(counts, setsAll)
	durations = append(durations, setsAll)
	if outcome == c.Outcome {
		counts = append(counts, setOutcome)
		durations = append(durations, setOutcome)
		if fn != "" {
			counts = append(counts, setFnOutcome)
			durations = append(durations, setFnOutcome)
		}
		if code != "" && code == c.Code {
			counts = append(counts, setOutcomeCode)
		}
	}
	var vals [4]float64
	vals[0], vals[1] = 1, c.Duration.Seconds()
	dirs := make([]Directive, 2, 3)
	dirs[0] = Directive{Dimensions: counts, Metrics: []Metric{{Name: metrics.Callbacks, Unit: Count, Values: vals[0:1:1]}}}
	dirs[1] = Directive{Dimensions: durations, Metrics: []Metric{{Name: metrics.CallbackDuration, Unit: Seconds, Values: vals[1:2:2]}}}
	var plain []Metric
	if req := metrics.RequestFrom(ctx); req != nil {
		if calls := req.StoreCalls(); len(calls) > 0 {
			calls = calls[:min(len(calls), MaxValuesPerMetric)] // the service makes at most three
			secs := make([]float64, len(calls))
			for i, d := range calls {
				secs[i] = d.Seconds()
			}
			plain = append(plain, Metric{Name: metrics.StoreCallDuration, Unit: Seconds, Values: secs})
		}
	}
	if !r.served.Swap(true) {
		vals[2] = 1
		plain = append(plain, Metric{Name: metrics.ColdStarts, Unit: Count, Values: vals[2:3:3]})
	}
	if len(plain) > 0 {
		dirs = append(dirs, Directive{Dimensions: noDimensions, Metrics: plain})
	}
	return r.attr(Event{Directives: dirs})
}

// StoreCall collects the call for the line of ctx's request.
func (r *Recorder) StoreCall(ctx context.Context, d time.Duration) {
	if req := metrics.RequestFrom(ctx); req != nil {
		req.Add(d)
	}
}

// Delivery returns deliveries_total by state and, for a delivered ticket,
// delivery_lag_seconds. It writes the "state" member itself: the line
// that carries it must not write another.
func (r *Recorder) Delivery(_ context.Context, d metrics.Delivery) slog.Attr {
	if err := d.Check(); err != nil {
		return slog.String("metrics_error", err.Error())
	}
	dirs := []Directive{{Dimensions: deliveryStateSet,
		Metrics: []Metric{{Name: metrics.Deliveries, Unit: Count, Values: []float64{1}}}}}
	if d.State == metrics.StateDelivered {
		dirs = append(dirs, Directive{Dimensions: noDimensions,
			Metrics: []Metric{{Name: metrics.DeliveryLag, Unit: Seconds, Values: []float64{d.Lag.Seconds()}}}})
	}
	return r.attr(Event{Directives: dirs, Dimensions: []Dimension{{metrics.LabelState, d.State}}})
}

// TicketsWaiting returns the tickets_waiting gauge's value.
func (r *Recorder) TicketsWaiting(_ context.Context, n int) slog.Attr {
	return r.attr(Event{Directives: []Directive{{Dimensions: noDimensions,
		Metrics: []Metric{{Name: metrics.TicketsWaiting, Unit: Count, Values: []float64{float64(n)}}}}}})
}

func (r *Recorder) attr(e Event) slog.Attr {
	e.Namespace = r.Namespace
	if e.Namespace == "" {
		e.Namespace = DefaultNamespace
	}
	if r.Now != nil {
		e.Timestamp = r.Now()
	} else {
		e.Timestamp = time.Now()
	}
	a, err := Attr(e)
	if err != nil {
		// Only a bad namespace or an unknown state gets here: say so in
		// the line rather than lose it.
		return slog.String("metrics_error", err.Error())
	}
	return a
}

// Check refuses a namespace CloudWatch would not accept, so a bad
// configuration stops the function at start instead of every line
// carrying a metrics_error.
func (r *Recorder) Check() error {
	e := Event{Namespace: r.Namespace, Directives: []Directive{{Dimensions: noDimensions,
		Metrics: []Metric{{Name: metrics.Callbacks, Values: []float64{0}}}}}}
	if e.Namespace == "" {
		e.Namespace = DefaultNamespace
	}
	return e.Validate()
}
