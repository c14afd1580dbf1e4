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
package otelsetup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/contrib/instrumentation/github.com/aws/aws-sdk-go-v2/otelaws" //nolint:staticcheck // deprecated upstream without a release that drops it; its attribute builders are what mark the read-ahead (the SDK's own smithy tracing has none)
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
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

// Provider is what Setup installed.
type Provider struct {
	sdk *sdktrace.TracerProvider // nil when nothing exports

	// On Lambda: the processor each invocation flushes, the flush's
	// budget and where its drops are logged.
	invocations  *invocationProcessor
	flushTimeout time.Duration
	log          *slog.Logger
}

// Exporting reports whether spans are recorded and exported.
func (p *Provider) Exporting() bool { return p != nil && p.sdk != nil }

// Flush exports the spans ended so far, within ctx; a Lambda calls it
// (through LambdaHandler) before each invocation returns, since a frozen
// sandbox exports nothing.
func (p *Provider) Flush(ctx context.Context) error {
	if !p.Exporting() {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// TracerProvider is the provider spans are recorded with, for the doors
// (tracing.Door); nil when nothing exports.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if !p.Exporting() {
		return nil
	}
	return p.sdk
}

// Shutdown flushes and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Exporting() {
		return nil
	}
	return p.sdk.Shutdown(ctx)
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
	// The endpoint as o.Getenv reads it (the exporter's other settings,
	// headers, timeout, TLS, from the process's environment).
	endpoint := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = strings.TrimRight(env("OTEL_EXPORTER_OTLP_ENDPOINT"), "/") + "/v1/traces"
	}
	expOpts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	if o.Lambda {
		// One attempt per flush, within its budget: these override
		// OTEL_EXPORTER_OTLP_TIMEOUT and the exporter's retries (up to a
		// minute), which would hold the answer.
		expOpts = append(expOpts, otlptracehttp.WithTimeout(timeout),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	}
	exp, err := otlptracehttp.New(ctx, expOpts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(o.Service)),
		must(resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	p := &Provider{}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if o.Lambda {
		p.invocations, p.flushTimeout, p.log = newInvocationProcessor(exp), timeout, o.Logger
		opts = append(opts, sdktrace.WithSpanProcessor(p.invocations), sdktrace.WithIDGenerator(xray.NewIDGenerator()))
	} else {
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	p.sdk = sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(p.sdk)
	return p, nil
}

// DroppedSpans is how many spans the Lambda flushes have dropped since
// Setup.
func (p *Provider) DroppedSpans() int64 {
	if p == nil || p.invocations == nil {
		return 0
	}
	return p.invocations.dropped.Load()
}

// flushInvocation exports the spans of the invocation whose context is
// ctx within its budget (flushBudget), and logs the ones it dropped.
func (p *Provider) flushInvocation(ctx context.Context) {
	budget := flushBudget(ctx, cmp.Or(p.flushTimeout, DefaultFlushTimeout), time.Now())
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	if p.invocations == nil { // a provider not set up for Lambda
		_ = p.sdk.ForceFlush(fctx)
		return
	}
	r := p.invocations.flush(fctx)
	if r.Dropped > 0 && p.log != nil {
		// The error's text is left out: it may quote the collector's
		// answer.
		p.log.WarnContext(ctx, "spans dropped", slog.Int("dropped_spans", r.Dropped),
			slog.Int64("dropped_spans_total", p.invocations.dropped.Load()),
			slog.String("reason", r.Reason), slog.Int("exported_spans", r.Exported),
			slog.Duration("flush_budget", budget))
	}
}

// must keeps a resource the environment partly described: a malformed
// OTEL_RESOURCE_ATTRIBUTES entry is dropped, not fatal.
func must(r *resource.Resource, _ error) *resource.Resource {
	if r == nil {
		return resource.Empty()
	}
	return r
}

// AWS instruments an AWS SDK configuration: one client span per request
// (service, operation, table), as OpenTelemetry's AWS SDK instrumentation
// records it, plus the read-ahead mark: a GetItem of an item whose
// partition key starts with readAheadPrefix (the operation items, which
// only the claim's read-ahead reads) carries idem.read_ahead=true.
//
// It instruments only while p exports (a nil p exports nothing): on the
// no-op provider each request would run the instrumentation's
// middlewares for spans nobody records.
func (p *Provider) AWS(cfg *aws.Config, readAheadPrefix string) {
	if !p.Exporting() {
		return
	}
	otelaws.AppendMiddlewares(&cfg.APIOptions, otelaws.WithTracerProvider(p.sdk), otelaws.WithAttributeBuilder(
		otelaws.DefaultAttributeBuilder, dynamoDBAttributes(readAheadPrefix)))
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
