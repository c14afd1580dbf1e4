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
package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// Options say what Setup installs.
type Options struct {
	// Getenv reads the environment (os.Getenv, or a config file's view).
	Getenv func(string) string
	// Service is the service.name when OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES name none.
	Service string
	// Lambda: X-Ray compatible trace ids.
	Lambda bool
}

// Provider is what Setup installed.
type Provider struct {
	sdk *sdktrace.TracerProvider // nil when nothing exports
}

// Exporting reports whether spans are recorded and exported.
func (p *Provider) Exporting() bool { return p != nil && p.sdk != nil }

// Flush exports the spans ended so far; a Lambda calls it before each
// invocation returns, since a frozen sandbox exports nothing.
func (p *Provider) Flush(ctx context.Context) error {
	if !p.Exporting() {
		return nil
	}
	return p.sdk.ForceFlush(ctx)
}

// Shutdown flushes and stops the exporter; the doors are no longer
// wrapped after it.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Exporting() {
		return nil
	}
	tracing.SetExporting(false)
	return p.sdk.Shutdown(ctx)
}

// Setup installs the global tracer provider and propagator from o.Getenv.
// A setting it cannot honour (an exporter or protocol other than OTLP
// over HTTP) is an error naming the variable, so a typo does not silently
// turn tracing off.
func Setup(ctx context.Context, o Options) (*Provider, error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tracing.SetExporting(false)
	env := func(k string) string { return strings.TrimSpace(o.Getenv(k)) }
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
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(o.Service)),
		must(resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if o.Lambda {
		opts = append(opts, sdktrace.WithIDGenerator(xray.NewIDGenerator()))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	tracing.SetExporting(true)
	return &Provider{sdk: tp}, nil
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
// It instruments only while spans export (call it after Setup): on the
// no-op provider each request would run the instrumentation's
// middlewares for spans nobody records.
func AWS(cfg *aws.Config, readAheadPrefix string) {
	if !tracing.Exporting() {
		return
	}
	otelaws.AppendMiddlewares(&cfg.APIOptions, otelaws.WithAttributeBuilder(
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
// (Flush) before it returns, since Lambda freezes the sandbox after.
func LambdaHandler[E, R any](p *Provider, f func(context.Context, E) (R, error)) func(context.Context, E) (R, error) {
	return func(ctx context.Context, ev E) (R, error) {
		header, _ := ctx.Value(lambdaTraceKey).(string)
		ctx = Invocation(ctx, header)
		r, err := f(ctx, ev)
		if p.Exporting() {
			_ = p.Flush(context.WithoutCancel(ctx))
		}
		return r, err
	}
}
