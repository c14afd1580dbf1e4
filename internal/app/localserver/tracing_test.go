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
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/otlptest"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
)

func attr(s *tracepb.Span, key string) (string, bool) { return otlptest.Attr(s, key) }

// A new call, its repeat, and the delivery of its ticket whose first send
// the helpdesk answers 429, exported over OTLP/HTTP to a real receiver:
// the door spans carry outcome, function, tenant and operation key; each
// delivery span is linked to the span of the call that created the
// ticket; the helpdesk calls and settles are children of the delivery
// spans; and none of the planted secrets (argument, nonce, hook key,
// Zendesk token and e-mail) is anywhere in the exported bytes.
func TestTracingExportsTheTicketsPath(t *testing.T) {
	rc := otlptest.Start(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL, "OTEL_SERVICE_NAME": "trace-test"}
	tp, err := otelsetup.Setup(context.Background(), otelsetup.Options{Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if !tp.Exporting() {
		t.Fatal("an OTLP endpoint is set, and the provider does not export")
	}
	defer otel.SetTracerProvider(noop.NewTracerProvider())
	defer func() { _ = tp.Shutdown(context.Background()) }()

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
	h, closer, err := LocalServer(context.Background(), cfg, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closer.Close() }()
	srv := httptest.NewServer(h)
	defer srv.Close()

	n, err := nonce.Generate(hookKey, 4)
	if err != nil {
		t.Fatal(err)
	}
	body := callbacktest.Create("user-a", "trace-req-1", callbacktest.Title(argument))
	for range 2 { // new, then repeat
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/callback", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Nonce", n)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("callback: %d", resp.StatusCode)
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
