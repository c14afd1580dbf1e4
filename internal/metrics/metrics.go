// Package metrics names what the product measures and defines the one
// small interface the callback handler and the delivery worker report
// to. Two implementations: EMF (emf_recorder.go, on the encoder of
// emf.go) writes CloudWatch Embedded Metric Format into the Lambda's own
// log line, internal/metrics/prom serves Prometheus on the local server. Both use the metric and label
// names below, verbatim, so an alarm written against one holds for the
// other.
//
// Labels (CloudWatch dimensions) are low-cardinality only: function is one
// of the catalogue's functions or empty, outcome one of the response
// table's status names, code one of the rejection codes, state one of the
// delivery states. Never a tenant, user, operation key or ticket id. The
// package knows none of those sets: each composition root gives them
// (CallbackLabels, DeliveryLabels) from their one home, so metrics imports
// neither the domain nor the transport.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Metric names, shared by CloudWatch and Prometheus. Durations are in
// seconds on both sides.
const (
	// Callbacks counts requests by function, outcome and code.
	Callbacks = "callbacks_total"
	// CallbackDuration is the time from the request's arrival to its log
	// line, by function, outcome and code.
	CallbackDuration = "callback_duration_seconds"
	// StoreCallDuration is the time of each call to the store (a
	// transaction, a ticket or user read).
	StoreCallDuration = "store_call_duration_seconds"
	// ColdStarts counts the first request a process serves.
	ColdStarts = "cold_starts_total"
	// Deliveries counts delivery outcomes by state.
	Deliveries = "deliveries_total"
	// DeliveryLag is the time from the ticket's commit to its delivery.
	DeliveryLag = "delivery_lag_seconds"
	// TicketsWaiting is how many tickets wait to be delivered when the
	// worker last counted: pending (due, or backing off before a retry)
	// or delivering under a lease; failed and unknown tickets are not
	// waiting, they need a person. Counted on the index of live
	// deliveries: by the scheduled sweep once per run (Lambda), after the
	// worker's sweeps (local server).
	TicketsWaiting = "tickets_waiting"
	// ReadAheadErrors counts the claim read-aheads that failed, by class
	// (ReadAheadClasses). A failed read is not an answer (the claim's
	// transaction answers), but a repeat is then answered at a
	// transaction's latency, and a role that denies the read makes every
	// claim fail it.
	ReadAheadErrors = "read_ahead_errors_total"
)

// Label (dimension) names.
const (
	// LabelDoor is the door a call came through: Doors.
	LabelDoor     = "door"
	LabelFunction = "function"
	LabelOutcome  = "outcome"
	LabelCode     = "code"
	LabelState    = "state"
	// LabelKind is a delivery's kind: DeliveryLabels.Kinds.
	LabelKind = "kind"
	// LabelClass is a failed read-ahead's class: ReadAheadClasses.
	LabelClass = "class"
)

// ReadAheadClasses are the values of the class label of ReadAheadErrors:
// the read was refused for its permissions (access_denied), throttled,
// timed out, or failed otherwise (other, the value of any class outside
// this set).
var ReadAheadClasses = []string{"access_denied", "throttled", "timeout", "other"}

// ReadAheadClass is class when it is one of ReadAheadClasses, else
// "other".
func ReadAheadClass(class string) string { return closed(class, ReadAheadClasses, "other") }

// CallbackLabels are the closed sets a callback's labels take their
// values from: the composition root gives them from the catalogue, the
// response table and the rejection codes.
type CallbackLabels struct {
	Functions []string // the catalogue's function names
	Outcomes  []string // the response table's names
	// OtherOutcome is the outcome label of an outcome outside Outcomes.
	OtherOutcome string
	Codes        []string // the rejection codes
}

// DeliveryLabels are the closed set the state label takes its values
// from, in the order they are listed: the delivery engine's step results.
// Retried is an attempt that ended with the ticket back in pending, to be
// sent again. Misconfigured is an attempt the destination refused for our
// credentials or URL (401, 403, 404 on create): the ticket stays pending,
// and every ticket fails the same way until someone fixes the destination.
type DeliveryLabels struct {
	States []string
	// Kinds are the kind label's values (a ticket, a comment, a close);
	// a kind outside them counts as OtherKind.
	Kinds []string
	// Delivered is the state of a delivered ticket, whose step carries
	// the delivery lag.
	Delivered string
}

// Names returns vs as strings, in their order: a closed set of a string
// type as label values.
func Names[S ~string](vs []S) []string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = string(v)
	}
	return s
}

// Doors are the values of the door label: AIVAX's callback and the MCP
// door. A call that names no door is the callback's.
var Doors = []string{"aivax", "mcp"}

// DoorLabel is c's door label: one of Doors.
func (c Callback) DoorLabel() string { return closed(c.Door, Doors, Doors[0]) }

// Callback is one request, as its log line reports it.
type Callback struct {
	// Door is the door the call came through: httpapi.DoorAIVAX (the
	// callback) or httpapi.DoorMCP. When set, the line carries it as its
	// "door" member, which CloudWatch's door dimension names; "" counts
	// as the callback's, without the door dimension.
	Door     string
	Function string // as the caller named it; Labels keeps only known names
	Outcome  string // the status name the log line carries
	Code     string // the rejection code, or ""
	Duration time.Duration
}

// Of returns the label values of c: function only when it names a
// function of the catalogue (a caller can send any name, so anything else
// is "", i.e. absent), outcome and code only from their closed sets.
func (l CallbackLabels) Of(c Callback) (function, outcomeName, code string) {
	function = closed(c.Function, l.Functions, "")
	outcomeName = closed(c.Outcome, l.Outcomes, l.OtherOutcome)
	code = closed(c.Code, l.Codes, "")
	return function, outcomeName, code
}

func closed(v string, set []string, other string) string {
	if slices.Contains(set, v) {
		return v
	}
	return other
}

// DeliveryStep is one delivery attempt's end (the delivery engine's Step, as metrics count it).
type DeliveryStep struct {
	State string // one of DeliveryLabels.States
	Kind  string // DeliveryLabels.KindOf makes it a label
	// Lag is the time from the ticket's commit to its delivery; only for
	// DeliveryLabels.Delivered.
	Lag time.Duration
}

// OtherKind is the kind label of a delivery whose kind is not one of
// DeliveryLabels.Kinds (a tool's own effect).
const OtherKind = "other"

// KindOf is d's kind label: one of l.Kinds, else OtherKind.
func (l DeliveryLabels) KindOf(d DeliveryStep) string { return closed(d.Kind, l.Kinds, OtherKind) }

// KindLabels are l.Kinds and OtherKind: every value of the kind label.
func (l DeliveryLabels) KindLabels() []string { return append(slices.Clone(l.Kinds), OtherKind) }

// Check refuses a state of d outside l.States: a label takes only values
// of its closed set.
func (l DeliveryLabels) Check(d DeliveryStep) error {
	if !slices.Contains(l.States, d.State) {
		// The value itself is not repeated: it may be anything.
		return fmt.Errorf("metrics: a delivery state is not one of %v", l.States)
	}
	return nil
}

// Recorder receives what happened. Each method returns an attribute for
// the log line that reports the same event (the zero slog.Attr when the
// recorder has nothing to add): that is how the Lambda's metrics ride on
// the line already written, with no extra line and no extra call.
type Recorder interface {
	// Callback records one request. ctx is the request's context (see
	// WithRequest).
	Callback(ctx context.Context, c Callback) slog.Attr
	// StoreCall records one store call made for the request of ctx.
	StoreCall(ctx context.Context, d time.Duration)
	// Delivery records the end of one delivery attempt.
	Delivery(ctx context.Context, d DeliveryStep) slog.Attr
	// TicketsWaiting records how many tickets wait to be delivered.
	TicketsWaiting(ctx context.Context, n int) slog.Attr
	// ReadAheadError records one failed read-ahead of class (one of
	// ReadAheadClasses).
	ReadAheadError(ctx context.Context, class string) slog.Attr
}

// ReadAheadReporter returns the hook a DynamoDB store calls with each
// read-ahead that failed (dynamo.Options.OnReadAheadError): it counts the
// failure on rec() (nil: counted nowhere) under classify(err)'s class,
// and logs the first failure of the hook's life, one per process since
// each composition root builds one, at WARN with its class and error.
// Later failures write a line only when the recorder has metric members
// for it (EMF, whose metrics ride on log lines): that line carries the
// class and the count, not the error again. Nothing is dropped silently:
// every failure is counted, and the first is explained.
func ReadAheadReporter(rec func() Recorder, logger *slog.Logger, classify func(error) string) func(context.Context, error) {
	var logged atomic.Bool
	return func(ctx context.Context, err error) {
		class := ReadAheadClass(classify(err))
		var attr slog.Attr
		if r := rec(); r != nil {
			attr = r.ReadAheadError(ctx, class)
		}
		// A recorder's members name the class themselves (EMF writes its
		// dimension as a member); otherwise the line names it.
		members := !attr.Equal(slog.Attr{})
		if !members {
			attr = slog.String(LabelClass, class)
		}
		if !logged.Swap(true) {
			logger.LogAttrs(ctx, slog.LevelWarn, "read-ahead failed: repeats are answered by the transaction instead; logged once per process, counted in "+ReadAheadErrors,
				attr, slog.String("error", err.Error()))
			return
		}
		if members {
			logger.LogAttrs(ctx, slog.LevelInfo, "read-ahead failed", attr)
		}
	}
}

// Request collects what a request's store calls took, for the line that
// reports the request.
type Request struct {
	mu    sync.Mutex
	calls []time.Duration
	buf   [4]time.Duration
}

type requestKey struct{}

// WithRequest returns a context that collects the store calls made under
// it, and the collector.
func WithRequest(ctx context.Context) (context.Context, *Request) {
	r := &Request{}
	r.calls = r.buf[:0]
	return context.WithValue(ctx, requestKey{}, r), r
}

// RequestFrom returns the collector of ctx, or nil.
func RequestFrom(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// Add records one store call.
func (r *Request) Add(d time.Duration) {
	r.mu.Lock()
	r.calls = append(r.calls, d)
	r.mu.Unlock()
}

// AppendSeconds appends the first max durations recorded so far, in
// seconds, to dst.
func (r *Request) AppendSeconds(dst []float64, max int) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, d := range r.calls {
		if i == max {
			break
		}
		dst = append(dst, d.Seconds())
	}
	return dst
}
