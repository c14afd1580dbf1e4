package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

type attemptKey struct{}

// WithAttempt marks ctx as the delivery's send number n (1 for the
// first), for the helpdesk call's span.
func WithAttempt(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, attemptKey{}, n)
}

// Transport wraps a helpdesk client's transport: one client span per
// call, with the method, the host (never the path or query, which may
// carry a webhook's secret), the status, whether an Idempotency-Key was
// sent and the attempt number (WithAttempt); and the W3C traceparent on
// the request, so a receiver that reads it joins the delivery's trace.
//
// OpenTelemetry's net/http client instrumentation (otelhttp) is not used
// here because its spans carry url.full, the whole URL.
func Transport(next http.RoundTripper) *RoundTripper { return &RoundTripper{Base: next} }

// RoundTripper is Transport's http.RoundTripper.
type RoundTripper struct{ Base http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t *RoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := Tracer().Start(r.Context(), spanHelpdeskCall+r.Method, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.ServerAddress(r.URL.Hostname()),
			AttrKeySent.Bool(r.Header.Get("Idempotency-Key") != ""))
		if n, ok := ctx.Value(attemptKey{}).(int); ok {
			span.SetAttributes(AttrAttempt.Int(n))
		}
	}
	if sc := span.SpanContext(); sc.IsValid() {
		r = r.Clone(ctx)
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	resp, err := t.Base.RoundTrip(r)
	if err != nil {
		span.SetStatus(codes.Error, "no answer")
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	return resp, nil
}
