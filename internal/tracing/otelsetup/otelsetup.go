// Package otelsetup installs the process's OpenTelemetry tracer provider
// from the standard OTEL_* environment variables, and instruments the AWS
// SDK. With nothing to export to (no OTLP endpoint, OTEL_SDK_DISABLED=true
// or OTEL_TRACES_EXPORTER=none) it installs the API's no-op provider: no
// span is recorded, and what the product's code pays is a context lookup
// per span. The W3C propagator is installed either way, so a request's
// traceparent still reaches the ticket it creates.
//
// With an endpoint, spans go over OTLP/HTTP (protobuf) to it: the
// exporter, the sampler (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG)
// and the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) read
// their own variables, as the SDK documents them. On Lambda the X-Ray ID
// generator makes trace ids X-Ray accepts, and Invocation starts each
// invocation's context from its X-Ray trace header.
//
// A Lambda function exports its spans at the end of each invocation,
// before it answers (LambdaHandler), in one request bounded by
// TRACE_FLUSH_TIMEOUT (DefaultFlushTimeout) and by the invocation's
// remaining time: the exporter's own timeout is that budget and it does
// not retry, and no goroutine exports in the background. Spans that do
// not make it are dropped, counted on a "spans dropped" log line, and
// never sent with a later invocation. A collector that hangs, refuses or
// fails thus costs each answer at most the budget. The local server
// batches and exports in the background instead (the SDK's batch span
// processor, whose queue drops rather than blocks when full): no request
// waits on its exporter.
//
// Built with -tags notrace, the OpenTelemetry SDK and its exporter are
// left out (notrace.go): nothing exports, and an endpoint set is an
// error at start. That build is what make bench measures tracing's cost
// in size and cold start against; the functions deploy without the tag.
package otelsetup

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Options say what Setup installs.
type Options struct {
	// Getenv reads the environment (os.Getenv, or a config file's view).
	Getenv func(string) string
	// Service is the service.name when OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES name none.
	Service string
	// Lambda: X-Ray compatible trace ids, and spans exported at the end
	// of each invocation within its flush budget (LambdaHandler).
	Lambda bool
	// Logger writes the line of each Lambda flush that dropped spans;
	// nil: none is written (the spans are counted all the same).
	Logger *slog.Logger
}

// Setup installs the global tracer provider and propagator from o.Getenv.
// A setting it cannot honour (an exporter or protocol other than OTLP
// over HTTP) is an error naming the variable, so a typo does not silently
// turn tracing off.
func Setup(ctx context.Context, o Options) (*Provider, error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	env := func(k string) string { return strings.TrimSpace(o.Getenv(k)) }
	// Checked whether or not anything exports, so that a bad value is
	// reported when it is set, not when a collector is added.
	timeout, err := flushTimeout(env)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return &Provider{}, nil
	}
	switch exp := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		otel.SetTracerProvider(noop.NewTracerProvider())
		return &Provider{}, nil
	default:
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: only otlp (over HTTP) and none are supported", exp)
	}
	if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return &Provider{}, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := env(k); v != "" {
			if v != "http/protobuf" {
				return nil, fmt.Errorf("tracing: %s=%q: only http/protobuf is supported", k, v)
			}
			break
		}
	}
	return setupExporter(ctx, o, env, timeout)
}

// xrayHeader is the carrier key of the X-Ray trace header.
const xrayHeader = "X-Amzn-Trace-Id"

// Invocation returns ctx with the invocation's X-Ray trace (header, the
// Lambda runtime's Lambda-Runtime-Trace-Id or _X_AMZN_TRACE_ID) as the
// remote parent, so the function's spans join Lambda's own segment. A
// missing or malformed header leaves ctx as it is.
func Invocation(ctx context.Context, header string) context.Context {
	if header == "" {
		return ctx
	}
	out := xray.Propagator{}.Extract(ctx, propagation.MapCarrier{xrayHeader: header})
	if !trace.SpanContextFromContext(out).IsValid() {
		return ctx
	}
	return out
}

// lambdaTraceKey is where aws-lambda-go puts the invocation's
// Lambda-Runtime-Trace-Id header in the handler's context.
const lambdaTraceKey = "x-amzn-trace-id"

// LambdaHandler wraps a Lambda handler: each invocation's context starts
// from its X-Ray trace (Invocation), and the spans it ended are exported
// before it returns, since Lambda freezes the sandbox after: within
// TRACE_FLUSH_TIMEOUT and ending FlushMargin before the invocation's
// deadline at the latest, the rest dropped and counted.
func LambdaHandler[E, R any](p *Provider, f func(context.Context, E) (R, error)) func(context.Context, E) (R, error) {
	return func(ctx context.Context, ev E) (R, error) {
		header, _ := ctx.Value(lambdaTraceKey).(string)
		ctx = Invocation(ctx, header)
		r, err := f(ctx, ev)
		if p.Exporting() {
			p.flushInvocation(ctx)
		}
		return r, err
	}
}
