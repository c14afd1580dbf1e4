package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// The members of an MCP request's params._meta that carry W3C trace
// context (the MCP specification's tracing conventions, SEP-414: the
// keys are unprefixed, their values the W3C header values).
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// spanToolCall + the tool's name is the span of one MCP tool call, named
// as OpenTelemetry's MCP conventions name it ("{mcp.method.name}
// {target}").
const spanToolCall = "tools/call "

// noopSpan is what ToolCall returns while nothing exports: ending it ends
// nothing.
var noopSpan = trace.SpanFromContext(context.Background())

// ToolCall starts the span of one MCP tool call of the catalogue's
// function tool. Its parent is the trace context the request carried in
// params._meta (traceparent, and tracestate beside it) when traceparent
// is a valid W3C value: the caller's span, which may differ from the
// transport's; the HTTP request's span (Door, whose parent is the
// traceparent header) is then a link. Without a valid traceparent in
// _meta, the parent is ctx's span, the HTTP request's. The caller sets
// the call's attributes from its outcome (SetOutcome) and ends the
// span.
//
// The span is recorded with the provider of the Door serving the request;
// outside a Door (nothing exports), ToolCall returns ctx and a span that
// records nothing, at no cost.
func ToolCall(ctx context.Context, tool, traceparent, tracestate string) (context.Context, trace.Span) {
	tp, ok := doorProvider(ctx)
	if !ok {
		return ctx, noopSpan
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.McpMethodNameToolsCall, semconv.GenAIToolName(tool))}
	parent := ctx
	if traceparent != "" {
		c := propagation.MapCarrier{MetaTraceparent: traceparent}
		if tracestate != "" {
			c[MetaTracestate] = tracestate
		}
		// Extracted onto an empty context, so that a malformed value is
		// told apart from the HTTP span already in ctx.
		if sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c)); sc.IsValid() {
			parent = trace.ContextWithRemoteSpanContext(ctx, sc)
			if http := trace.SpanContextFromContext(ctx); http.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: http}))
			}
		}
	}
	return tp.Tracer(ScopeName).Start(parent, spanToolCall+tool, opts...)
}
