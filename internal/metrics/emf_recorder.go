package metrics

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultNamespace is the CloudWatch namespace when none is configured
// (template.yaml's MetricsNamespace parameter sets it).
const DefaultNamespace = "AIVAX/Callback"

// EMF is the Lambda's Recorder: each method returns the EMF
// members for the line that reports the event, and the function's one JSON
// log line per request becomes its metrics. It makes no call of its own.
type EMF struct {
	Namespace string           // DefaultNamespace when empty
	Now       func() time.Time // time.Now when nil
	// CallbackLabels and DeliveryLabels are the labels' closed sets, from
	// the composition root: a value outside its set is never a dimension.
	CallbackLabels CallbackLabels
	DeliveryLabels DeliveryLabels
	served         atomic.Bool // a request was served: later ones are warm

	once   sync.Once
	shapes [shapes][]byte // "_aws" of each callback shape, after the timestamp
	err    error          // a namespace CloudWatch refuses
}

var _ Recorder = (*EMF)(nil)

// Dimension sets. The callback's sets name the line's own function, outcome
// and code members; an empty set also records the metric without
// dimensions (the totals the alarms divide by).
var (
	setsAll          = []string{}
	setOutcome       = []string{LabelOutcome}
	setFnOutcome     = []string{LabelFunction, LabelOutcome}
	setDoorOutcome   = []string{LabelDoor, LabelOutcome}
	setDoorFnOutcome = []string{LabelDoor, LabelFunction, LabelOutcome}
	setOutcomeCode   = []string{LabelOutcome, LabelCode}
	setState         = []string{LabelState}
	setKindState     = []string{LabelKind, LabelState}
	noDimensions     = [][]string{setsAll}
	deliveryStateSet = [][]string{setState, setKindState}
)

// Callback returns the request's metrics: callbacks_total and
// callback_duration_seconds by outcome (and function, and code when they
// are present), store_call_duration_seconds for each store call collected
// under ctx, and cold_starts_total on the process's first request. The
// dimensions are the line's own "door" (when c.Door is set), "function",
// "outcome" and "code" members
// (internal/httpapi writes them), so they are not written again; a value
// outside its closed set (a function name the catalogue does not know) is
// left out of the dimension sets, never made a dimension.
//
// The "_aws" member depends only on which of those are present, so its
// directives are encoded once per shape (by callbackEvent, the generic
// encoder) and only the timestamp and the values are written per request.
func (r *EMF) Callback(ctx context.Context, c Callback) slog.Attr {
	var buf [8]float64
	store := buf[:0]
	if req := RequestFrom(ctx); req != nil {
		store = req.AppendSeconds(store, MaxValuesPerMetric) // the service makes at most three
	}
	sh := r.callbackShape(c, len(store) > 0, !r.served.Swap(true))
	r.once.Do(r.encodeShapes)
	if r.err != nil {
		return slog.String("metrics_error", r.err.Error())
	}
	b := make([]byte, 0, len(r.shapes[sh])+48)
	b = append(b, `{"Timestamp":`...)
	b = strconv.AppendInt(b, r.now().UnixMilli(), 10)
	b = append(b, r.shapes[sh]...)
	attrs := make([]slog.Attr, 2, 5)
	attrs[0] = slog.Any("_aws", rawJSON(b))
	attrs[1] = slog.Float64(Callbacks, 1)
	attrs = append(attrs, slog.Float64(CallbackDuration, c.Duration.Seconds()))
	switch {
	case len(store) == 1:
		attrs = append(attrs, slog.Float64(StoreCallDuration, store[0]))
	case len(store) > 1:
		attrs = append(attrs, slog.Any(StoreCallDuration, rawJSON(appendValue(nil, store))))
	}
	if sh&shapeCold != 0 {
		attrs = append(attrs, slog.Float64(ColdStarts, 1))
	}
	return slog.Attr{Key: "", Value: slog.GroupValue(attrs...)}
}

// A callback line's shape: which dimensions and metrics it has.
const (
	shapeFunction = 1 << iota // the function is the catalogue's
	shapeOutcome              // the outcome is one of CallbackLabels.Outcomes
	shapeCode                 // a rejection code of CallbackLabels.Codes
	shapeStore                // store calls were made
	shapeCold                 // the process's first request
	shapeDoor                 // the line names its door (Callback.Door)
	shapes
)

func (r *EMF) callbackShape(c Callback, store, cold bool) int {
	fn, outcome, code := r.CallbackLabels.Of(c)
	sh := 0
	if outcome == c.Outcome {
		sh |= shapeOutcome
		if fn != "" {
			sh |= shapeFunction
		}
		if code != "" && code == c.Code {
			sh |= shapeCode
		}
	}
	if store {
		sh |= shapeStore
	}
	if c.Door != "" && c.DoorLabel() == c.Door {
		sh |= shapeDoor
	}
	if cold {
		sh |= shapeCold
	}
	return sh
}

func (r *EMF) callbackEvent(sh int, duration float64, store []float64) EMFEvent {
	counts := [][]string{setsAll}
	durations := [][]string{setsAll}
	if sh&shapeOutcome != 0 {
		counts = append(counts, setOutcome)
		durations = append(durations, setOutcome)
		if sh&shapeDoor != 0 {
			counts = append(counts, setDoorOutcome)
		}
	}
	if sh&shapeFunction != 0 {
		counts = append(counts, setFnOutcome)
		durations = append(durations, setFnOutcome)
		if sh&shapeDoor != 0 {
			counts = append(counts, setDoorFnOutcome)
		}
	}
	if sh&shapeCode != 0 {
		counts = append(counts, setOutcomeCode)
	}
	count := Metric{Name: Callbacks, Unit: Count, Values: []float64{1}}
	dur := Metric{Name: CallbackDuration, Unit: Seconds, Values: []float64{duration}}
	// One directive when both metrics share their sets: the line is
	// shorter, and writing it costs in proportion to its length.
	dirs := []Directive{{Dimensions: counts, Metrics: []Metric{count, dur}}}
	if sh&shapeCode != 0 {
		dirs = []Directive{{Dimensions: counts, Metrics: []Metric{count}}, {Dimensions: durations, Metrics: []Metric{dur}}}
	}
	var plain []Metric
	if sh&shapeStore != 0 {
		plain = append(plain, Metric{Name: StoreCallDuration, Unit: Seconds, Values: store})
	}
	if sh&shapeCold != 0 {
		plain = append(plain, Metric{Name: ColdStarts, Unit: Count, Values: []float64{1}})
	}
	if len(plain) > 0 {
		dirs = append(dirs, Directive{Dimensions: noDimensions, Metrics: plain})
	}
	return EMFEvent{Namespace: r.namespace(), Timestamp: r.now(), Directives: dirs}
}

// encodeShapes encodes each shape's "_aws" member after its timestamp.
func (r *EMF) encodeShapes() {
	for sh := range shapes {
		e := r.callbackEvent(sh, 0, []float64{0})
		if err := e.Validate(); err != nil {
			r.err = err
			return
		}
		full := e.AppendAWS(nil)
		// Drop {"Timestamp":N; keep from ,"CloudWatchMetrics" on.
		i := bytes.Index(full, []byte(`,"CloudWatchMetrics"`))
		r.shapes[sh] = full[i:]
	}
}

// StoreCall collects the call for the line of ctx's request.
func (r *EMF) StoreCall(ctx context.Context, d time.Duration) {
	if req := RequestFrom(ctx); req != nil {
		req.Add(d)
	}
}

// Delivery returns deliveries_total by state, and by kind and state, and,
// for a delivered record, delivery_lag_seconds. It writes the "state" and
// "kind" members itself: the line that carries it must not write others.
func (r *EMF) Delivery(_ context.Context, d DeliveryStep) slog.Attr {
	if err := r.DeliveryLabels.Check(d); err != nil {
		return slog.String("metrics_error", err.Error())
	}
	return r.attr(r.deliveryEvent(d))
}

func (r *EMF) deliveryEvent(d DeliveryStep) EMFEvent {
	dirs := []Directive{{Dimensions: deliveryStateSet,
		Metrics: []Metric{{Name: Deliveries, Unit: Count, Values: []float64{1}}}}}
	if d.State == r.DeliveryLabels.Delivered {
		dirs = append(dirs, Directive{Dimensions: noDimensions,
			Metrics: []Metric{{Name: DeliveryLag, Unit: Seconds, Values: []float64{d.Lag.Seconds()}}}})
	}
	return EMFEvent{Directives: dirs, Dimensions: []Dimension{{LabelState, d.State}, {LabelKind, r.DeliveryLabels.KindOf(d)}}}
}

// TicketsWaiting returns the tickets_waiting gauge's value.
func (r *EMF) TicketsWaiting(_ context.Context, n int) slog.Attr {
	return r.attr(r.waitingEvent(n))
}

// ReadAheadError returns read_ahead_errors_total by class; it writes the
// "class" member itself.
func (r *EMF) ReadAheadError(_ context.Context, class string) slog.Attr {
	return r.attr(readAheadEvent(class))
}

func readAheadEvent(class string) EMFEvent {
	return EMFEvent{Directives: []Directive{{Dimensions: [][]string{{LabelClass}},
		Metrics: []Metric{{Name: ReadAheadErrors, Unit: Count, Values: []float64{1}}}}},
		Dimensions: []Dimension{{LabelClass, ReadAheadClass(class)}}}
}

func (r *EMF) waitingEvent(n int) EMFEvent {
	return EMFEvent{Directives: []Directive{{Dimensions: noDimensions,
		Metrics: []Metric{{Name: TicketsWaiting, Unit: Count, Values: []float64{float64(n)}}}}}}
}

func (r *EMF) namespace() string {
	if r.Namespace == "" {
		return DefaultNamespace
	}
	return r.Namespace
}

func (r *EMF) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *EMF) attr(e EMFEvent) slog.Attr {
	e.Namespace, e.Timestamp = r.namespace(), r.now()
	a, err := EMFAttr(e)
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
func (r *EMF) Check() error {
	e := EMFEvent{Namespace: r.namespace(), Directives: []Directive{{Dimensions: noDimensions,
		Metrics: []Metric{{Name: Callbacks, Values: []float64{0}}}}}}
	return e.Validate()
}
