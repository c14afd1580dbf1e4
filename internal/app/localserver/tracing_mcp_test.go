//go:build !nosqlite

package localserver

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/mcpdoor"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/otlptest"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
)

// An MCP tools/call whose params._meta carries a W3C traceparent and
// tracestate (the keys the MCP specification reserves), sent with a
// traceparent header of another trace, then its repeat with a malformed
// _meta traceparent, exported over OTLP/HTTP to a real receiver:
//   - the first call's span ("tools/call create_ticket") is in the _meta's
//     trace, its parent the _meta's span id, its trace state the _meta's,
//     and it links to the HTTP request's span ("mcp POST"), which is in
//     the header's trace;
//   - the repeat's span falls back to the HTTP request's span as parent
//     (the malformed value is ignored, the call answered);
//   - both carry door mcp, the function, the tenant, the outcome (created,
//     then deduplicated) and the operation key;
//   - the ticket's delivery span links to the first call's span;
//   - neither the bearer token (nor its signature alone) nor the argument
//     is anywhere in the exported bytes.
func TestTracingMCPToolCall(t *testing.T) {
	rc := otlptest.Start(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL}
	tp, err := otelsetup.Setup(context.Background(), otelsetup.Options{Getenv: func(k string) string { return env[k] }, Service: "trace-mcp"})
	if err != nil {
		t.Fatal(err)
	}
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	defer func() { _ = tp.Shutdown(context.Background()) }()

	const argument = "mcp-argument-PLANTED-3b8e"
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{Email: "agent@example.test", Token: "zd-token"})
	cfg := localConfig(t, "hook-key")
	cfg.MCP = config.MCP{Issuer: "http://127.0.0.1:1/dev-issuer", Audience: "http://127.0.0.1:1/mcp", UserClaim: "sub",
		DevKey: filepath.Join(t.TempDir(), "mcp-dev-key.pem")}
	cfg.Delivery = &config.Destination{Kind: "zendesk", URL: fake.URL(), Email: "agent@example.test", Token: "zd-token",
		MaxAttempts: 3, Timeout: 2 * time.Second}
	token, err := devToken(cfg, "user-a")
	if err != nil {
		t.Fatal(err)
	}
	h, closer, err := LocalServer(context.Background(), cfg, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closer.Close() }()
	srv := httptest.NewServer(h)
	defer srv.Close()

	const (
		metaTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
		metaSpan    = "00f067aa0ba902b7"
		metaState   = "vendor=planted-state"
		headerTrace = "0af7651916cd43dd8448eb211c80319c"
	)
	call := func(traceparent string) {
		t.Helper()
		meta := `"_meta":{"` + mcpdoor.RequestIDMeta + `":"mcp-trace-1","traceparent":` + callbacktest.Quote(traceparent) +
			`,"tracestate":` + callbacktest.Quote(metaState) + `}`
		body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_ticket","arguments":` +
			callbacktest.Title(argument) + `,` + meta + `}}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("traceparent", "00-"+headerTrace+"-b7ad6b7169203331-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("tools/call: %d", resp.StatusCode)
		}
	}
	call("00-" + metaTrace + "-" + metaSpan + "-01")
	call("00-not-a-traceparent")

	spans, raw := waitDelivered(t, tp, rc)
	t.Log("\n" + tree(spans))

	byID := map[string]*tracepb.Span{}
	var tools, https []*tracepb.Span
	var delivery *tracepb.Span
	for _, s := range spans {
		byID[hex.EncodeToString(s.GetSpanId())] = s
		switch s.GetName() {
		case "tools/call create_ticket":
			tools = append(tools, s)
		case "mcp POST":
			https = append(https, s)
		case tracing.SpanDelivery:
			delivery = s
		}
	}
	if len(tools) != 2 || len(https) != 2 {
		t.Fatalf("%d tool call spans and %d HTTP spans, want 2 of each:\n%s", len(tools), len(https), tree(spans))
	}
	for _, s := range https {
		if got := hex.EncodeToString(s.GetTraceId()); got != headerTrace {
			t.Errorf("HTTP span in trace %s, want the header's %s", got, headerTrace)
		}
	}
	var first, repeat *tracepb.Span
	for _, s := range tools {
		if s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("tool call span kind %v, want server", s.GetKind())
		}
		for k, want := range map[string]string{string(tracing.AttrDoor): "mcp", string(tracing.AttrFunction): "create_ticket",
			string(tracing.AttrTenant): "tenant-a", "mcp.method.name": "tools/call", "gen_ai.tool.name": "create_ticket"} {
			if v, _ := attr(s, k); v != want {
				t.Errorf("tool call span: %s = %q, want %q", k, v, want)
			}
		}
		if v, _ := attr(s, string(tracing.AttrOperationKey)); v == "" {
			t.Error("tool call span without the operation key")
		}
		switch o, _ := attr(s, string(tracing.AttrOutcome)); o {
		case "created":
			first = s
		case "deduplicated":
			repeat = s
		default:
			t.Errorf("tool call span outcome %q", o)
		}
	}
	if first == nil || repeat == nil {
		t.Fatalf("tool call outcomes: want created and deduplicated:\n%s", tree(spans))
	}
	// The _meta's context is the first call's parent; the HTTP span a link.
	if got := hex.EncodeToString(first.GetTraceId()); got != metaTrace {
		t.Errorf("first call's span in trace %s, want the _meta's %s", got, metaTrace)
	}
	if got := hex.EncodeToString(first.GetParentSpanId()); got != metaSpan {
		t.Errorf("first call's span has parent %s, want the _meta's %s", got, metaSpan)
	}
	if first.GetTraceState() != metaState {
		t.Errorf("first call's trace state %q, want the _meta's %q", first.GetTraceState(), metaState)
	}
	if l := first.GetLinks(); len(l) != 1 || byID[hex.EncodeToString(l[0].GetSpanId())].GetName() != "mcp POST" {
		t.Errorf("first call's links %v, want one to its HTTP span", l)
	}
	// A malformed _meta traceparent: the HTTP span is the parent.
	if p := byID[hex.EncodeToString(repeat.GetParentSpanId())]; p.GetName() != "mcp POST" ||
		!bytes.Equal(repeat.GetTraceId(), p.GetTraceId()) {
		t.Errorf("repeat's span parent %x, want its HTTP span", repeat.GetParentSpanId())
	}
	if len(repeat.GetLinks()) != 0 {
		t.Errorf("repeat's span links %v, want none", repeat.GetLinks())
	}
	// The ticket carries the first call's span: its delivery links to it.
	if l := delivery.GetLinks(); len(l) != 1 || !bytes.Equal(l[0].GetSpanId(), first.GetSpanId()) ||
		!bytes.Equal(l[0].GetTraceId(), first.GetTraceId()) {
		t.Errorf("delivery span links %v, want one to the first call's span %x", l, first.GetSpanId())
	}

	if !bytes.Contains(raw, []byte("tenant-a")) {
		t.Fatal("the exported bytes do not carry the tenant id: the search below proves nothing")
	}
	signature := token[strings.LastIndexByte(token, '.')+1:]
	for name, secret := range map[string]string{"bearer token": token, "token's signature": signature, "argument": argument} {
		if len(secret) < 16 {
			t.Fatalf("%s %q is too short to search for", name, secret)
		}
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the exported spans carry the %s", name)
		}
	}
}
