//go:build !notrace

package otelsetup

import (
	"context"

	"github.com/aws/smithy-go"
	smithytracing "github.com/aws/smithy-go/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// smithyTracerProvider is the AWS SDK's tracing (smithy-go's tracing
// interfaces, a client's Options.TracerProvider) over an OpenTelemetry
// provider: the adapter smithy-go publishes as its own module
// (smithyoteltracing), kept here because the module proxy this project
// builds from does not serve it.
//
// It differs from that adapter in one way: only the operation's span (the
// client span each request starts, "DynamoDB.GetItem") is recorded. The
// SDK's inner steps (serializer, retry loop, attempt, HTTP request,
// payload hash, deserializer) record no span of their own; what they set
// on theirs (the attempt number, the HTTP status, the request id) goes on
// the operation's span. So a request costs one span, as with the contrib
// middleware before it, and a Lambda flush carries one span per request.
type smithyTracerProvider struct{ tp trace.TracerProvider }

func (p smithyTracerProvider) Tracer(scope string, _ ...smithytracing.TracerOption) smithytracing.Tracer {
	return smithyTracer{p.tp.Tracer(scope)}
}

type smithyTracer struct{ t trace.Tracer }

// StartSpan records a client span (the operation's) as an OpenTelemetry
// span, a child of ctx's; any other kind folds into the operation span
// enclosing it, or is dropped outside one.
func (t smithyTracer) StartSpan(ctx context.Context, name string, opts ...smithytracing.SpanOption) (context.Context, smithytracing.Span) {
	var o smithytracing.SpanOptions
	for _, fn := range opts {
		fn(&o)
	}
	if o.Kind != smithytracing.SpanKindClient {
		var op *smithySpan
		switch parent, _ := smithytracing.GetSpan(ctx); p := parent.(type) {
		case *smithySpan:
			op = p
		case foldedSpan:
			op = p.op
		}
		s := foldedSpan{name: name, op: op}
		s.setProperties(o.Properties)
		return smithytracing.WithSpan(ctx, s), s
	}
	ctx, span := t.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs(o.Properties)...))
	s := &smithySpan{name: name, span: span}
	return smithytracing.WithSpan(ctx, s), s
}

// smithySpan is a recorded operation span.
type smithySpan struct {
	name string
	span trace.Span
}

func (s *smithySpan) Name() string { return s.name }

func (s *smithySpan) Context() smithytracing.SpanContext {
	sc := s.span.SpanContext()
	return smithytracing.SpanContext{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), IsRemote: sc.IsRemote()}
}

func (s *smithySpan) AddEvent(name string, opts ...smithytracing.EventOption) {
	var o smithytracing.EventOptions
	for _, fn := range opts {
		fn(&o)
	}
	s.span.AddEvent(name, trace.WithAttributes(attrs(o.Properties)...))
}

func (s *smithySpan) SetStatus(st smithytracing.SpanStatus) {
	switch st {
	case smithytracing.SpanStatusOK:
		s.span.SetStatus(codes.Ok, "")
	case smithytracing.SpanStatusError:
		s.span.SetStatus(codes.Error, "")
	}
}

func (s *smithySpan) SetProperty(k, v any) {
	if kv, ok := attr(k, v); ok {
		s.span.SetAttributes(kv)
	}
}

func (s *smithySpan) End() { s.span.End() }

// foldedSpan is an inner step of an operation: its properties go on the
// operation's span (op; nil outside one: dropped), and it records nothing
// else.
type foldedSpan struct {
	name string
	op   *smithySpan
}

func (s foldedSpan) Name() string { return s.name }

func (s foldedSpan) Context() smithytracing.SpanContext {
	if s.op == nil {
		return smithytracing.SpanContext{}
	}
	return s.op.Context()
}

func (foldedSpan) AddEvent(string, ...smithytracing.EventOption) {}
func (foldedSpan) SetStatus(smithytracing.SpanStatus)            {}
func (foldedSpan) End()                                          {}

func (s foldedSpan) SetProperty(k, v any) {
	if s.op != nil {
		s.op.SetProperty(k, v)
	}
}

func (s foldedSpan) setProperties(p smithy.Properties) {
	for k, v := range p.Values() {
		s.SetProperty(k, v)
	}
}

// renamed are the SDK's property names whose current OpenTelemetry
// semantic-convention name differs.
var renamed = map[string]string{"http.status_code": "http.response.status_code"}

// attrs converts the properties attr takes, and drops the others.
func attrs(p smithy.Properties) []attribute.KeyValue {
	var out []attribute.KeyValue
	for k, v := range p.Values() {
		if kv, ok := attr(k, v); ok {
			out = append(out, kv)
		}
	}
	return out
}

// attr converts a property with a string key and a value of a type an
// OpenTelemetry attribute holds (bool, int, int64, float64, string, or a
// slice of one); others are dropped, as smithy-go's adapter drops them.
func attr(k, v any) (attribute.KeyValue, bool) {
	key, ok := k.(string)
	if !ok {
		return attribute.KeyValue{}, false
	}
	if r, ok := renamed[key]; ok {
		key = r
	}
	switch v := v.(type) {
	case bool:
		return attribute.Bool(key, v), true
	case int:
		return attribute.Int(key, v), true
	case int64:
		return attribute.Int64(key, v), true
	case float64:
		return attribute.Float64(key, v), true
	case string:
		return attribute.String(key, v), true
	case []bool:
		return attribute.BoolSlice(key, v), true
	case []int:
		return attribute.IntSlice(key, v), true
	case []int64:
		return attribute.Int64Slice(key, v), true
	case []float64:
		return attribute.Float64Slice(key, v), true
	case []string:
		return attribute.StringSlice(key, v), true
	}
	return attribute.KeyValue{}, false
}
