package lambdart

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// TestInvocationHandler: lines logged with a request's context carry the
// invocation's requestId, and xrayTraceId only when it is traced; a line
// of the runtime's context alone carries its requestId; lines outside an
// invocation carry neither.
func TestInvocationHandler(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(invocationHandler{slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: lambdacontext.ReplaceAttr})})
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-untraced"})
	logger.InfoContext(WithInvocation(ctx, Invocation{RequestID: "req-untraced"}), "callback")
	ctx = lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-traced"})
	logger.InfoContext(WithInvocation(ctx, Invocation{RequestID: "req-traced", TraceID: "1-5759e988-bd862e3fe1be46a994272793"}), "callback")
	// The delivery function's lines: no function URL, the runtime's context only.
	logger.InfoContext(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-delivery"}), "sweep")
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
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4", len(lines))
	}
	if lines[0]["requestId"] != "req-untraced" || lines[0]["xrayTraceId"] != nil {
		t.Errorf("untraced line: %v", lines[0])
	}
	if lines[1]["requestId"] != "req-traced" || lines[1]["xrayTraceId"] != "1-5759e988-bd862e3fe1be46a994272793" {
		t.Errorf("traced line: %v", lines[1])
	}
	if lines[2]["requestId"] != "req-delivery" || lines[2]["xrayTraceId"] != nil {
		t.Errorf("line of the runtime's context: %v", lines[2])
	}
	if lines[3]["requestId"] != nil || lines[3]["xrayTraceId"] != nil || lines[3]["message"] != "started" {
		t.Errorf("line outside a request: %v", lines[3])
	}
}
