package lambdaurl

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// TestInvocationHandler: lines logged with a request's context carry the
// invocation's requestId, and xrayTraceId only when it is traced; lines
// outside a request carry neither.
func TestInvocationHandler(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(invocationHandler{slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: lambdacontext.ReplaceAttr})})
	h := Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		logger.InfoContext(r.Context(), "callback")
	}))
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-untraced"})
	if _, err := h(ctx, events.LambdaFunctionURLRequest{RawPath: "/callback"}); err != nil {
		t.Fatal(err)
	}
	ctx = lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-traced"})
	if _, err := h(ctx, events.LambdaFunctionURLRequest{RawPath: "/callback",
		Headers: map[string]string{"x-amzn-trace-id": "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"}}); err != nil {
		t.Fatal(err)
	}
	logger.Info("started")
	var lines []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	if lines[0]["requestId"] != "req-untraced" || lines[0]["xrayTraceId"] != nil {
		t.Errorf("untraced line: %v", lines[0])
	}
	if lines[1]["requestId"] != "req-traced" || lines[1]["xrayTraceId"] != "1-5759e988-bd862e3fe1be46a994272793" {
		t.Errorf("traced line: %v", lines[1])
	}
	if lines[2]["requestId"] != nil || lines[2]["xrayTraceId"] != nil || lines[2]["message"] != "started" {
		t.Errorf("line outside a request: %v", lines[2])
	}
}
