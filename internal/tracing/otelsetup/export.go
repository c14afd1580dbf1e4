//go:build !notrace

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
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

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

// setupExporter installs the SDK's provider exporting over OTLP/HTTP to
// the endpoint env names (Setup has checked the settings).
func setupExporter(ctx context.Context, o Options, env func(string) string, timeout time.Duration) (*Provider, error) {
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

// AWS instruments an AWS SDK configuration with the SDK's own tracing:
// every client made from cfg records one client span per request
// ("DynamoDB.GetItem", rpc.service and rpc.method naming it, its status,
// the HTTP status, the request id, the attempts) on p's provider
// (smithyTracerProvider), with the region and, for DynamoDB, the tables.
// A GetItem also carries idem.read_ahead, readAhead(ctx) of its context,
// when readAhead is set: the claim store marks its read-ahead's context
// (dynamostore.IsReadAhead).
//
// It instruments only while p exports (a nil p exports nothing): on the
// no-op provider each request would run the instrumentation for spans
// nobody records.
func (p *Provider) AWS(cfg *aws.Config, readAhead func(context.Context) bool) {
	if !p.Exporting() {
		return
	}
	cfg.ServiceOptions = append(cfg.ServiceOptions, withTracerProvider(smithyTracerProvider{p.sdk}))
	cfg.APIOptions = append(cfg.APIOptions, requestAttributes(readAhead))
}
