package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

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
