package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/lambdaurl"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/otlptest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
)

// TestLambdaDynamoDBSpans: the callback function as main builds it
// (otelsetup.Setup for Lambda, then Handler on the SDK's default
// configuration, pointed at DynamoDB Local), a new call and its repeat
// invoked through the function URL adapter with an X-Ray trace header
// each, spans exported over OTLP/HTTP to a loopback receiver:
//   - each door span ("aivax /callback") takes the invocation's X-Ray
//     trace and parent;
//   - each DynamoDB request is a client span of OpenTelemetry's AWS SDK
//     instrumentation ("DynamoDB.<operation>", rpc.method naming the
//     operation, aws.dynamodb.table_names naming the table), a child of
//     its call's door span;
//   - each call's claim is a TransactWriteItems not marked as the
//     read-ahead, beside a GetItem marked idem.read_ahead=true; the new
//     call's user lookup is a GetItem marked false.
func TestLambdaDynamoDBSpans(t *testing.T) {
	endpoint := testenv.DynamoDB(t)
	table := tableWithUserA(t, endpoint)
	rc := otlptest.Start(t)
	testenv.IsolatedAWSEnv(t, map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": endpoint})
	const hookKey = "hook-key-PLANTED-0c41"
	// The result cache off (RESULT_CACHE_SIZE=0): the repeat's claim goes
	// to DynamoDB, so both calls show a claim's spans.
	env := map[string]string{"TABLE_NAME": table, "HOOK_KEY": hookKey, "NONCE_MIN_COST": "4",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL, "RESULT_CACHE_SIZE": "0"}
	getenv := func(k string) string { return env[k] }
	cfg, err := config.FromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := otelsetup.Setup(context.Background(), otelsetup.Options{Getenv: getenv, Service: "callback", Lambda: true})
	if err != nil {
		t.Fatal(err)
	}
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	defer func() { _ = tp.Shutdown(context.Background()) }()
	h, err := Handler(context.Background(), cfg, discard(), tp)
	if err != nil {
		t.Fatal(err)
	}
	invoke := otelsetup.LambdaHandler(tp, lambdaurl.Wrap(h))

	const argument = "argument-PLANTED-a7d3"
	body := callbacktest.Create("user-a", "dynamo-trace-1", callbacktest.Title(argument))
	roots := []string{"67891233abcdef0123456789abcdef01", "67891233abcdef0123456789abcdef02"}
	const parent = "53995c3f42cd8ad8"
	for _, root := range roots {
		n, err := nonce.Generate(hookKey, 4)
		if err != nil {
			t.Fatal(err)
		}
		ev := events.LambdaFunctionURLRequest{RawPath: "/callback", Body: body,
			Headers:        map[string]string{"content-type": "application/json", "x-request-nonce": n},
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}}
		xray := "Root=1-" + root[:8] + "-" + root[8:] + ";Parent=" + parent + ";Sampled=1"
		ctx := context.WithValue(context.Background(), "x-amzn-trace-id", xray) //nolint:staticcheck // aws-lambda-go's own key
		resp, err := invoke(ctx, ev)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("invoke: %v %d %s", err, resp.StatusCode, resp.Body)
		}
	}

	// Each invocation returned after every request of its claim ended,
	// the one its answer did not wait for included (settled), and its
	// flush exported them: both calls' read-aheads and transactions are
	// in, with nothing to wait for.
	spans, raw := rc.Snapshot()
	readAheads, txs := 0, 0
	for _, s := range spans {
		if v, _ := otlptest.Attr(s, string(tracing.AttrReadAhead)); v == "true" {
			readAheads++
		}
		if s.GetName() == "DynamoDB.TransactWriteItems" {
			txs++
		}
	}
	if readAheads != 2 || txs != 2 {
		t.Fatalf("%d read-ahead and %d transaction spans once both invocations returned, want 2 of each:\n%s", readAheads, txs, dump(spans))
	}
	t.Log("\n" + dump(spans))

	doors := map[string]*tracepb.Span{} // by span id
	outcome := map[string]string{}      // door span id → outcome
	for _, s := range spans {
		if s.GetName() == "aivax /callback" {
			doors[otlptest.ID(s)] = s
			outcome[otlptest.ID(s)], _ = otlptest.Attr(s, string(tracing.AttrOutcome))
			if got := hex.EncodeToString(s.GetParentSpanId()); got != parent {
				t.Errorf("door span parent %s, want the X-Ray header's %s", got, parent)
			}
			if !slices.Contains(roots, hex.EncodeToString(s.GetTraceId())) {
				t.Errorf("door span in trace %x, want an invocation's X-Ray root", s.GetTraceId())
			}
		}
	}
	if len(doors) != 2 {
		t.Fatalf("%d door spans, want 2:\n%s", len(doors), dump(spans))
	}
	type seen struct{ tx, readAhead, plainGet int }
	per := map[string]*seen{}
	for id := range doors {
		per[id] = &seen{}
	}
	for _, s := range spans {
		op, isDynamo := strings.CutPrefix(s.GetName(), "DynamoDB.")
		if !isDynamo {
			continue
		}
		p := hex.EncodeToString(s.GetParentSpanId())
		d := doors[p]
		if d == nil {
			t.Errorf("%s [%s] is not a child of a door span (parent %s)", s.GetName(), otlptest.ID(s), p)
			continue
		}
		if !bytes.Equal(s.GetTraceId(), d.GetTraceId()) {
			t.Errorf("%s in another trace than its door span", s.GetName())
		}
		if s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("%s kind %v, want client", s.GetName(), s.GetKind())
		}
		if m, _ := otlptest.Attr(s, "rpc.method"); !strings.HasSuffix(m, op) {
			t.Errorf("%s: rpc.method %q, want the operation", s.GetName(), m)
		}
		if tables := stringsAttr(s, "aws.dynamodb.table_names"); !slices.Equal(tables, []string{table}) {
			t.Errorf("%s: aws.dynamodb.table_names %v, want [%s]", s.GetName(), tables, table)
		}
		ra, marked := otlptest.Attr(s, string(tracing.AttrReadAhead))
		switch op {
		case "TransactWriteItems":
			if marked && ra != "false" {
				t.Errorf("the transaction is marked idem.read_ahead=%s", ra)
			}
			per[p].tx++
		case "GetItem":
			switch {
			case !marked:
				t.Errorf("GetItem [%s] without idem.read_ahead", otlptest.ID(s))
			case ra == "true":
				per[p].readAhead++
			default:
				per[p].plainGet++
			}
		}
	}
	for id, n := range per {
		if n.tx != 1 || n.readAhead != 1 {
			t.Errorf("call %s (%s): %d transactions and %d read-aheads, want one of each", id, outcome[id], n.tx, n.readAhead)
		}
		if outcome[id] == "created" && n.plainGet < 1 {
			t.Errorf("the new call: no GetItem marked idem.read_ahead=false (the user lookup)")
		}
	}
	if !slices.Contains(slices.Collect(maps.Values(outcome)), "created") || !slices.Contains(slices.Collect(maps.Values(outcome)), "deduplicated") {
		t.Errorf("door outcomes %v, want created and deduplicated", outcome)
	}
	if !bytes.Contains(raw, []byte(table)) {
		t.Fatal("the exported bytes do not carry the table name: the search below proves nothing")
	}
	for name, secret := range map[string]string{"hook key": hookKey, "argument": argument} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the exported spans carry the %s", name)
		}
	}
}

func dump(spans []*tracepb.Span) string {
	return otlptest.Tree(spans, string(tracing.AttrOutcome), "rpc.method", string(tracing.AttrReadAhead))
}

// stringsAttr is span s's string-array attribute key.
func stringsAttr(s *tracepb.Span, key string) []string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			var out []string
			for _, v := range kv.GetValue().GetArrayValue().GetValues() {
				out = append(out, v.GetStringValue())
			}
			return out
		}
	}
	return nil
}
