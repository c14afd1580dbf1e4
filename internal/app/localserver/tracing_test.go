//go:build !nosqlite

package localserver

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/mcpdoor"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/otlptest"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
)

func attr(s *tracepb.Span, key string) (string, bool) { return otlptest.Attr(s, key) }

// exporting makes a provider that exports over OTLP/HTTP to a fresh
// receiver the global one for the test; env adds to the endpoint's
// variable, service names the service when env does not.
func exporting(t *testing.T, env map[string]string, service string) (*otelsetup.Provider, *otlptest.Receiver) {
	t.Helper()
	rc := otlptest.Start(t)
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL}
	for k, v := range env {
		vars[k] = v
	}
	tp, err := otelsetup.Setup(context.Background(), otelsetup.Options{Getenv: func(k string) string { return vars[k] }, Service: service})
	if err != nil {
		t.Fatal(err)
	}
	if !tp.Exporting() {
		t.Fatal("an OTLP endpoint is set, and the provider does not export")
	}
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rc
}

// serve runs the local server of cfg, its spans recorded by tp, on a
// loopback listener for the test.
func serve(t *testing.T, cfg config.Local, tp *otelsetup.Provider) *httptest.Server {
	t.Helper()
	h, closer, err := LocalServer(context.Background(), checked(t, cfg), discard(), tp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closer.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// A new call, its repeat, and the delivery of its ticket whose first send
// the helpdesk answers 429, exported over OTLP/HTTP to a real receiver:
// the door spans carry outcome, function, tenant and operation key; each
// delivery span is linked to the span of the call that created the
// ticket; the helpdesk calls and settles are children of the delivery
// spans; and none of the planted secrets (argument, nonce, hook key,
// Zendesk token and e-mail) is anywhere in the exported bytes.
func TestTracingExportsTheTicketsPath(t *testing.T) {
	tp, rc := exporting(t, map[string]string{"OTEL_SERVICE_NAME": "trace-test"}, "")

	const (
		hookKey  = "hook-key-PLANTED-7f3a"
		argument = "argument-PLANTED-91c2"
		token    = "zendesk-token-PLANTED-5d0e"
		email    = "planted-agent@example.test"
	)
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{Email: email, Token: token})
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, N: 1, Fault: fakehelpdesk.TooManyRequests("1")})
	cfg := localConfig(t, hookKey)
	cfg.Delivery = &config.Destination{Kind: "zendesk", URL: fake.URL(), Email: email, Token: token,
		MaxAttempts: 3, Timeout: 2 * time.Second}
	srv := serve(t, cfg, tp)

	n, err := nonce.Generate(hookKey, 4)
	if err != nil {
		t.Fatal(err)
	}
	body := callbacktest.Create("user-a", "trace-req-1", callbacktest.Title(argument))
	for range 2 { // new, then repeat
		if code, _ := callbacktest.Send(t, http.MethodPost, srv.URL+"/callback", n, body); code != http.StatusOK {
			t.Fatalf("callback: %d", code)
		}
	}

	// Wait for the delivered step's span (the second send, after the 429's
	// Retry-After of 1 s).
	spans, raw := waitDelivered(t, tp, rc)

	byID := map[string]*tracepb.Span{}
	var doors, deliveries []*tracepb.Span
	for _, s := range spans {
		byID[hex.EncodeToString(s.GetSpanId())] = s
		switch s.GetName() {
		case "aivax /callback":
			doors = append(doors, s)
		case tracing.SpanDelivery:
			deliveries = append(deliveries, s)
		}
	}
	if len(doors) != 2 {
		t.Fatalf("%d door spans, want 2 (new and repeat)", len(doors))
	}
	var created *tracepb.Span
	outcomes := map[string]bool{}
	for _, d := range doors {
		o, _ := attr(d, string(tracing.AttrOutcome))
		outcomes[o] = true
		for _, k := range []string{string(tracing.AttrFunction), string(tracing.AttrTenant), string(tracing.AttrOperationKey), string(tracing.AttrDoor)} {
			if v, ok := attr(d, k); !ok || v == "" {
				t.Errorf("door span (%s) without %s", o, k)
			}
		}
		if fn, _ := attr(d, string(tracing.AttrFunction)); fn != "create_ticket" {
			t.Errorf("function %q", fn)
		}
		if tn, _ := attr(d, string(tracing.AttrTenant)); tn != "tenant-a" {
			t.Errorf("tenant %q", tn)
		}
		if o == "created" {
			created = d
		}
	}
	if !outcomes["created"] || !outcomes["deduplicated"] || created == nil {
		t.Fatalf("door outcomes %v, want created and deduplicated", outcomes)
	}
	if len(deliveries) < 2 {
		t.Fatalf("%d delivery spans, want the 429 step and the delivered step", len(deliveries))
	}
	sends := map[string]bool{}
	for _, d := range deliveries {
		if len(d.GetLinks()) != 1 || !bytes.Equal(d.GetLinks()[0].GetSpanId(), created.GetSpanId()) ||
			!bytes.Equal(d.GetLinks()[0].GetTraceId(), created.GetTraceId()) {
			t.Errorf("delivery span %x: links %v, want one to the created call's span %x", d.GetSpanId(), d.GetLinks(), created.GetSpanId())
		}
		var settle, call bool
		for _, s := range spans {
			if !bytes.Equal(s.GetParentSpanId(), d.GetSpanId()) {
				continue
			}
			switch s.GetName() {
			case tracing.SpanSettle:
				settle = true
			case "helpdesk POST":
				call = true
				status, _ := attr(s, "http.response.status_code")
				attempt, _ := attr(s, string(tracing.AttrAttempt))
				sends[attempt+":"+status] = true
				if host, _ := attr(s, "server.address"); host != "127.0.0.1" {
					t.Errorf("helpdesk span host %q", host)
				}
				if sent, _ := attr(s, string(tracing.AttrKeySent)); sent != "true" {
					t.Errorf("helpdesk span: idempotency key sent = %q", sent)
				}
			}
		}
		if !settle || !call {
			t.Errorf("delivery span %x: settle child %v, helpdesk call child %v", d.GetSpanId(), settle, call)
		}
	}
	if !sends["1:429"] || !sends["2:201"] {
		t.Errorf("helpdesk sends (attempt:status) %v, want 1:429 and 2:201", sends)
	}
	// The search can fail: a value the spans must carry is found by it.
	if !bytes.Contains(raw, []byte("tenant-a")) {
		t.Fatal("the exported bytes do not carry the tenant id: the secrets search below proves nothing")
	}
	for name, secret := range map[string]string{"argument": argument, "nonce": n, "hook key": hookKey,
		"zendesk token": token, "zendesk e-mail": email} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the exported spans carry the %s", name)
		}
	}
	t.Log("\n" + tree(spans))
}

// tree prints spans as a tree, with the attributes these tests read.
// waitDelivered flushes tp until rc holds the span of a delivery step that
// ended delivered, and returns every span and the bytes exported; the
// test fails after 30 s without one.
func waitDelivered(t *testing.T, tp *otelsetup.Provider, rc *otlptest.Receiver) ([]*tracepb.Span, []byte) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_ = tp.Flush(context.Background())
		spans, raw := rc.Snapshot()
		for _, s := range spans {
			if st, _ := attr(s, string(tracing.AttrState)); s.GetName() == tracing.SpanDelivery && st == "delivered" {
				return spans, raw
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivered span after 30 s; %d spans:\n%s", len(spans), tree(spans))
		}
	}
}

func tree(spans []*tracepb.Span) string {
	return otlptest.Tree(spans, string(tracing.AttrOutcome), string(tracing.AttrState), string(tracing.AttrAttempt),
		"http.response.status_code", string(tracing.AttrReadAhead))
}

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
	tp, rc := exporting(t, nil, "trace-mcp")

	const argument = "mcp-argument-PLANTED-3b8e"
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{Email: "agent@example.test", Token: "zd-token"})
	cfg := localConfig(t, "hook-key")
	cfg.MCP = devMCP(t)
	cfg.Delivery = &config.Destination{Kind: "zendesk", URL: fake.URL(), Email: "agent@example.test", Token: "zd-token",
		MaxAttempts: 3, Timeout: 2 * time.Second}
	token, err := devToken(cfg, "user-a")
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, cfg, tp)

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
		req := mcpRequest(t, srv.URL+"/mcp", token, body)
		req.Header.Set("traceparent", "00-"+headerTrace+"-b7ad6b7169203331-01")
		if code := status(t, req); code != http.StatusOK {
			t.Fatalf("tools/call: %d", code)
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
