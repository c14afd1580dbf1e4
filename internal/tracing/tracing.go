// Package tracing is the product's OpenTelemetry tracing on the API side:
// the span names and attribute keys, the door's server span, the
// helpdesk's client span, the W3C traceparent a ticket carries across the
// outbox, and the link a delivery makes to it. It reads the global
// tracer provider and propagator, which internal/tracing/otelsetup
// installs (a no-op provider when nothing exports, so every span here
// then costs a context lookup).
//
// What a span carries is chosen here, never copied wholesale: the door's
// attributes come from its log line's closed list (LogHandler), the
// helpdesk call's are the method and host only (not the URL, which may
// hold a webhook's secret). Arguments, nonces, the hook key, tokens and
// helpdesk credentials are never read.
package tracing

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"

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

// exporting is whether spans are recorded and exported (otelsetup sets it).
var exporting atomic.Bool

// SetExporting tells the package whether the installed provider records
// and exports spans.
func SetExporting(on bool) { exporting.Store(on) }

// Exporting reports whether the installed provider records and exports
// spans (SetExporting).
func Exporting() bool { return exporting.Load() }

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
// door beside it) in one server span per request, with OpenTelemetry's
// net/http instrumentation: its parent is the request's traceparent
// header, else the span context already in the request's context (on
// Lambda, the invocation's X-Ray trace). The outcome, function, tenant
// and operation key are set by LogHandler from the request's log line.
//
// While nothing exports (SetExporting not called with true), Door returns
// h itself: the door then costs nothing, and on Lambda the invocation's
// X-Ray trace in the context still reaches the ticket's traceparent.
func Door(h http.Handler) http.Handler {
	if !exporting.Load() {
		return h
	}
	return otelhttp.NewHandler(h, "callback",
		otelhttp.WithSpanNameFormatter(doorSpanName),
		otelhttp.WithMeterProvider(noMeter),
		// The installed provider, named: without it the instrumentation
		// takes the provider of the span already in the request's
		// context, and on Lambda that span is the invocation's X-Ray
		// parent, a remote span whose provider records nothing.
		otelhttp.WithTracerProvider(otel.GetTracerProvider()),
	)
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

// callbackLine is the message of the one line each door writes per
// request (docs/contract.md, Logs and metrics).
const callbackLine = "callback"

// lineAttrs maps the members of a callback line that a span may carry to
// their attribute keys: a closed list, so the line's other members (and
// anything added to it later) stay out of the trace.
var lineAttrs = map[string]attribute.Key{
	"door":          AttrDoor,
	"function":      AttrFunction,
	"tenant":        AttrTenant,
	"outcome":       AttrOutcome,
	"code":          AttrCode,
	"operation_key": AttrOperationKey,
}

// LogHandler wraps h so that each door's callback line also sets, on the
// request's recording span, the attributes of lineAttrs. The line is the
// one place both doors report a request's outcome, function, tenant and
// operation key, already bounded (the function name clipped) and free of
// arguments, nonces and keys; the span takes the same values from it.
// Records of other messages, and requests without a recording span, pass
// through untouched.
func LogHandler(h slog.Handler) slog.Handler { return &logHandler{next: h} }

type logHandler struct{ next slog.Handler }

func (l *logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	// A line below the logger's level still carries the request's
	// outcome to its span.
	return l.next.Enabled(ctx, level) || trace.SpanFromContext(ctx).IsRecording()
}

func (l *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == callbackLine {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			attrs := make([]attribute.KeyValue, 0, len(lineAttrs))
			r.Attrs(func(a slog.Attr) bool {
				attrs = appendLineAttr(attrs, a)
				return true
			})
			span.SetAttributes(attrs...)
		}
	}
	if !l.next.Enabled(ctx, r.Level) {
		return nil
	}
	return l.next.Handle(ctx, r)
}

func (l *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{next: l.next.WithAttrs(attrs)}
}

func (l *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{next: l.next.WithGroup(name)}
}

// SetLineAttrs sets on span the attributes of lineAttrs that a door's
// callback line (attrs) carries: what LogHandler sets from the line, for
// a span that is not the one in the line's context (an MCP tool call's).
func SetLineAttrs(span trace.Span, attrs []slog.Attr) {
	if !span.IsRecording() {
		return
	}
	kv := make([]attribute.KeyValue, 0, len(lineAttrs))
	for _, a := range attrs {
		kv = appendLineAttr(kv, a)
	}
	span.SetAttributes(kv...)
}

// appendLineAttr appends a's attribute when a is a non-empty string member
// of lineAttrs.
func appendLineAttr(kv []attribute.KeyValue, a slog.Attr) []attribute.KeyValue {
	if k, ok := lineAttrs[a.Key]; ok && a.Value.Kind() == slog.KindString && a.Value.String() != "" {
		kv = append(kv, k.String(a.Value.String()))
	}
	return kv
}
