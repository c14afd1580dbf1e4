//go:build !notrace

package otelsetup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithytracing "github.com/aws/smithy-go/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

type readAheadMark struct{}

// recorded is a provider recording into a span recorder, and a DynamoDB
// client instrumented by AWS on it, sending to a fake endpoint that
// answers status with body.
func recorded(t *testing.T, status int, body string) (*tracetest.SpanRecorder, *sdktrace.TracerProvider, *dynamodb.Client) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amzn-Requestid", "request-id-1")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	rec := tracetest.NewSpanRecorder()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	cfg := aws.Config{Region: "eu-west-3", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		RetryMaxAttempts: 1}
	(&Provider{sdk: sdk}).AWS(&cfg, func(ctx context.Context) bool { return ctx.Value(readAheadMark{}) != nil })
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	return rec, sdk, client
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// The SDK's own tracing through the adapter: one client span per request,
// named by the service and operation, a child of the caller's span,
// with the SDK's attributes (inner steps folded in: the HTTP status, the
// request id, the attempt), the region, the DynamoDB table, and the
// read-ahead mark from the request's context; status OK.
func TestAWSRequestSpan(t *testing.T) {
	rec, sdk, client := recorded(t, 200, `{}`)
	ctx, parent := sdk.Tracer("test").Start(context.Background(), "parent")
	for _, marked := range []bool{true, false} {
		rctx := ctx
		if marked {
			rctx = context.WithValue(ctx, readAheadMark{}, true)
		}
		if _, err := client.GetItem(rctx, &dynamodb.GetItemInput{TableName: aws.String("tbl"), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "KEY-PLANTED"}}}); err != nil {
			t.Fatal(err)
		}
	}
	parent.End()
	spans := rec.Ended()
	if len(spans) != 3 {
		for _, s := range spans {
			t.Log(s.Name())
		}
		t.Fatalf("%d spans, want the two requests' and the parent", len(spans))
	}
	for i, s := range spans[:2] {
		a := attrsOf(s)
		if s.Name() != "DynamoDB.GetItem" || s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %q kind %v parent %v, want DynamoDB.GetItem, client, the caller's", s.Name(), s.SpanKind(), s.Parent().SpanID())
		}
		for k, want := range map[attribute.Key]string{"rpc.system": "aws-api", "rpc.service": "DynamoDB", "rpc.method": "GetItem",
			"aws.request_id": "request-id-1", "cloud.region": "eu-west-3", "db.system.name": "aws.dynamodb"} {
			if got := a[k].String(); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		if got := a["http.response.status_code"].AsInt64(); got != 200 {
			t.Errorf("http.response.status_code = %d", got)
		}
		if got := a["operation.attempt"].AsInt64(); got != 1 {
			t.Errorf("operation.attempt = %d", got)
		}
		if got := a["aws.dynamodb.table_names"].AsStringSlice(); len(got) != 1 || got[0] != "tbl" {
			t.Errorf("aws.dynamodb.table_names = %v", got)
		}
		if got, want := a[tracing.AttrReadAhead].AsBool(), i == 0; got != want {
			t.Errorf("request %d: idem.read_ahead = %v, want %v", i, got, want)
		}
		if s.Status().Code != codes.Ok {
			t.Errorf("status %v", s.Status())
		}
		for k, v := range a {
			if v.String() == "KEY-PLANTED" || v.String() == "secret" {
				t.Errorf("%s carries a key or credential: %s", k, v.String())
			}
		}
	}
}

// A failed request: its span has status Error and the API's error code.
func TestAWSRequestSpanError(t *testing.T) {
	rec, _, client := recorded(t, 400, `{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"no table"}`)
	_, err := client.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("a"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("b"), ConditionExpression: aws.String("attribute_exists(pk)"),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "y"}}}},
		{Put: &types.Put{TableName: aws.String("a"), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "z"}}}},
	}})
	if err == nil {
		t.Fatal("no error")
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s, a := spans[0], attrsOf(spans[0])
	if s.Name() != "DynamoDB.TransactWriteItems" || s.Status().Code != codes.Error {
		t.Errorf("span %q status %v, want DynamoDB.TransactWriteItems, error", s.Name(), s.Status())
	}
	if got := a["api.error_code"].AsString(); got != "ResourceNotFoundException" {
		t.Errorf("api.error_code = %q", got)
	}
	if got := a["http.response.status_code"].AsInt64(); got != 400 {
		t.Errorf("http.response.status_code = %d", got)
	}
	if got := a["aws.dynamodb.table_names"].AsStringSlice(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("aws.dynamodb.table_names = %v, want [a b]", got)
	}
	if _, ok := a[tracing.AttrReadAhead]; ok {
		t.Error("a transaction carries idem.read_ahead")
	}
}

// Properties convert to attributes when their key is a string and their
// value a type an attribute holds; the others are dropped. An inner step
// outside an operation span records nothing.
func TestSmithyProperties(t *testing.T) {
	var p smithy.Properties
	p.Set("b", true)
	p.Set("i", 3)
	p.Set("s", []string{"x"})
	p.Set("http.status_code", 204)
	p.Set("struct", struct{}{})
	p.Set(struct{}{}, "non-string key")
	got := map[attribute.Key]string{}
	for _, kv := range attrs(p) {
		got[kv.Key] = kv.Value.String()
	}
	want := map[attribute.Key]string{"b": "true", "i": "3", "s": `["x"]`, "http.response.status_code": "204"}
	if len(got) != len(want) {
		t.Errorf("attrs %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	rec := tracetest.NewSpanRecorder()
	tr := smithyTracerProvider{sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}.Tracer("test")
	_, s := tr.StartSpan(context.Background(), "step")
	s.SetProperty("k", "v")
	s.End()
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("an inner step outside an operation recorded %d spans", n)
	}
	if sc := s.Context(); sc.IsValid() {
		t.Errorf("an inner step outside an operation has a span context %+v", sc)
	}
	var _ smithytracing.TracerProvider = smithyTracerProvider{}
}
