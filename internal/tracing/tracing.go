// Package tracing is the product's OpenTelemetry tracing on the API side:
// the span names and attribute keys, the door's server span, the
// helpdesk's client span, the W3C traceparent a ticket carries across the
// outbox, and the link a delivery makes to it. The doors take the tracer
// provider they record with as an argument (Door: none, and they are not
// wrapped); the delivery's spans use the global provider and propagator,
// which internal/tracing/otelsetup installs (a no-op provider when
// nothing exports, so every span there then costs a context lookup).
//
// What a span carries is chosen here, never copied wholesale: the door's
// attributes are the closed list of Outcome, set by the door, the
// helpdesk call's are the method and host only (not the URL, which may
// hold a webhook's secret). Arguments, nonces, the hook key, tokens and
// helpdesk credentials are never read.
package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the product's own spans.
const ScopeName = "github.com/aivax-examples/idempotent-callback"

// Span names.
const (
	SpanDelivery      = "delivery ticket"   // one ticket's step, linked to the span that created it
	SpanSettle        = "delivery settle"   // the write that records the step's outcome
	SpanStreamBatch   = "delivery batch"    // one DynamoDB stream batch
	SpanSweep         = "delivery sweep"    // one scheduled or local sweep
	spanHelpdeskCall  = "helpdesk "         // + the method
	spanDoorAIVAX     = "aivax "            // + the path
	spanDoorMCP       = "mcp "              // + the method
	spanDoorOtherPath = "callback function" // any path the doors do not serve
)

// Attribute keys of the product's own attributes (the AWS SDK's and the
// HTTP server's follow OpenTelemetry's semantic conventions).
const (
	AttrDoor         = attribute.Key("callback.door")
	AttrFunction     = attribute.Key("callback.function")
	AttrOutcome      = attribute.Key("callback.outcome")
	AttrCode         = attribute.Key("callback.code")
	AttrTenant       = attribute.Key("tenant.id")
	AttrOperationKey = attribute.Key("callback.operation_key")
	AttrTicketID     = attribute.Key("ticket.id")
	AttrState        = attribute.Key("delivery.state")
	AttrAttempt      = attribute.Key("delivery.attempt")
	AttrKeySent      = attribute.Key("helpdesk.idempotency_key_sent")
	AttrReadAhead    = attribute.Key("idem.read_ahead")
	AttrBatchSize    = attribute.Key("delivery.batch_size")
	AttrLinked       = attribute.Key("delivery.linked") // the ticket carried a valid traceparent
)

// Tracer is the product's tracer on the global provider, looked up per
// use so a provider installed later (otelsetup.Setup) is the one used.
func Tracer() trace.Tracer { return otel.GetTracerProvider().Tracer(ScopeName) }

// Traceparent is the W3C traceparent of ctx's span ("00-<trace id>-<span
// id>-<flags>", 55 bytes), or "" when ctx carries no valid span context.
// It is what a ticket stores of the span that created it.
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// SpanContext parses a stored traceparent; ok is false for "" or a value
// that is not a valid W3C traceparent.
func SpanContext(traceparent string) (trace.SpanContext, bool) {
	if traceparent == "" {
		return trace.SpanContext{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// TraceID is the trace id of a stored traceparent, or "".
func TraceID(traceparent string) string {
	if sc, ok := SpanContext(traceparent); ok {
		return sc.TraceID().String()
	}
	return ""
}

// LinkTicket links span to the span that created the ticket, as its
// stored traceparent names it; a ticket item without one (written while
// no span was recording) is marked unlinked.
func LinkTicket(span trace.Span, traceparent string) {
	if !span.IsRecording() {
		return
	}
	sc, ok := SpanContext(traceparent)
	span.SetAttributes(AttrLinked.Bool(ok))
	if ok {
		span.AddLink(trace.Link{SpanContext: sc})
	}
}

// Door wraps a callback program's handler (the AIVAX door and the MCP
// door beside it) in one server span per request of tp, with
// OpenTelemetry's net/http instrumentation: its parent is the request's
// traceparent header, else the span context already in the request's
// context (on Lambda, the invocation's X-Ray trace). The door sets the
// outcome, function, tenant and operation key (SetOutcome). The
// request's context carries tp, for the spans
// the doors start below (ToolCall).
//
// With no provider (nil: nothing exports), Door returns h itself: the
// door then costs nothing, and on Lambda the invocation's X-Ray trace in
// the context still reaches the ticket's traceparent.
func Door(h http.Handler, tp trace.TracerProvider) http.Handler {
	if tp == nil {
		return h
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), providerKey{}, tp)))
	})
	return otelhttp.NewHandler(inner, "callback",
		otelhttp.WithSpanNameFormatter(doorSpanName),
		otelhttp.WithMeterProvider(noMeter),
		// The installed provider, named: without it the instrumentation
		// takes the provider of the span already in the request's
		// context, and on Lambda that span is the invocation's X-Ray
		// parent, a remote span whose provider records nothing.
		otelhttp.WithTracerProvider(tp),
	)
}

// providerKey is where Door puts its tracer provider in a request's
// context.
type providerKey struct{}

// doorProvider is the tracer provider of the Door that serves ctx's
// request; ok is false outside one.
func doorProvider(ctx context.Context) (trace.TracerProvider, bool) {
	tp, ok := ctx.Value(providerKey{}).(trace.TracerProvider)
	return tp, ok
}

func doorSpanName(_ string, r *http.Request) string {
	switch r.URL.Path {
	case "/callback", "/functions":
		return spanDoorAIVAX + r.URL.Path
	case "/mcp":
		return spanDoorMCP + r.Method
	}
	return spanDoorOtherPath
}

// noMeter keeps the HTTP instrumentation's metrics off: the product's
// metrics are its own (internal/metrics), and the door's span is all it
// takes from the instrumentation.
var noMeter = metricnoop.NewMeterProvider()

// Outcome is what a door's span carries of a request's outcome: the
// door, the function (as the door clipped it for its log line), the
// tenant, the outcome's name, the rejection's code and the operation key.
// Nothing else of the request (arguments, nonces, keys, tokens) has a
// place in it.
type Outcome struct {
	Door, Function, Tenant, Outcome, Code, OperationKey string
}

// SetOutcome sets o's non-empty members on span, when it records: the
// door sets them where it decides the outcome.
func SetOutcome(span trace.Span, o Outcome) {
	if !span.IsRecording() {
		return
	}
	kv := make([]attribute.KeyValue, 0, 6)
	for _, a := range [...]struct {
		k attribute.Key
		v string
	}{{AttrDoor, o.Door}, {AttrFunction, o.Function}, {AttrTenant, o.Tenant}, {AttrOutcome, o.Outcome},
		{AttrCode, o.Code}, {AttrOperationKey, o.OperationKey}} {
		if a.v != "" {
			kv = append(kv, a.k.String(a.v))
		}
	}
	span.SetAttributes(kv...)
}
