package mcpdoor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
	"github.com/aivax-examples/idempotent-callback/internal/mcpdoor"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// rpcRequestBody is a JSON-RPC body for method on revision: a request
// with id 1, or a notification; on 2026-07-28 a request carries the
// per-request _meta that revision requires.
func rpcRequestBody(rev, method, params string, notification bool) string {
	if rev >= "2026-07-28" && !notification {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + rev +
			`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
		if params == "{}" {
			params = "{" + meta + "}"
		} else {
			params = "{" + meta + "," + params[1:]
		}
	}
	id := `"id":1,`
	if notification {
		id = ""
	}
	return `{"jsonrpc":"2.0",` + id + `"method":"` + method + `","params":` + params + `}`
}

// serve sends r through the test server's handler and returns what it
// wrote. r's context has a deadline far beyond any answer: a handler that
// returns because it ran out (one that held the request open, as an event
// stream does until the client leaves) fails the test. The recorder holds
// the complete response once the handler returned: nothing is read while
// it runs.
func (e *env) serve(t *testing.T, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, r.WithContext(ctx))
	if ctx.Err() != nil {
		t.Fatalf("%s: the handler returned only when the request's deadline passed: it held the request open", r.Header.Get("Mcp-Method"))
	}
	return w
}

// mcpRequest is a POST to /mcp with a client's headers for rev, method
// and tool (the Mcp-Name header, when not empty).
func (e *env) mcpRequest(token, rev, method, tool, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, e.audience, strings.NewReader(body))
	callbacktest.SetMCPHeaders(r, token)
	if method == "initialize" && rev < "2026-07-28" {
		r.Header.Del("MCP-Protocol-Version") // sent after initialize, never with it
	} else {
		r.Header.Set("MCP-Protocol-Version", rev)
	}
	r.Header.Set("Mcp-Method", method)
	if tool != "" {
		r.Header.Set("Mcp-Name", tool)
	}
	return r
}

// lastLine is the door's last log line.
func (e *env) lastLine(t *testing.T) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(e.logs.String()), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("log line %q: %v", lines[len(lines)-1], err)
	}
	return m
}

// TestEveryMethodOneJSONAnswer: every method a client may send, on both
// revisions, gets one answer at once: the status each revision requires,
// one JSON body (application/json) for a request and 202 with no body for
// a notification, and nothing held open (subscriptions/listen included).
// The log line names the method and the status actually written.
func TestEveryMethodOneJSONAnswer(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	tok := e.token("user-a")
	const (
		result   = 0 // a JSON-RPC result
		notFound = -32601
		invalid  = -32602
		none     = 1 // no body: a notification accepted
		door     = 2 // the door's refusal body {"error","message"}
	)
	type want struct {
		status int
		answer int // result, a JSON-RPC error code, none or door
	}
	rows := []struct {
		method, tool, params string
		notification         bool
		modern, legacy       want // on 2026-07-28, on 2025-11-25
	}{
		{"initialize", "", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`, false,
			want{404, notFound}, want{200, result}},
		{"notifications/initialized", "", `{}`, true, want{202, none}, want{202, none}},
		{"notifications/cancelled", "", `{"requestId":1}`, true, want{202, none}, want{202, none}},
		{"notifications/roots/list_changed", "", `{}`, true, want{202, none}, want{202, none}},
		{"ping", "", `{}`, false, want{404, notFound}, want{200, result}},
		{"tools/list", "", `{}`, false, want{200, result}, want{200, result}},
		{"tools/call", "get_ticket", `{"name":"get_ticket","arguments":{"ticket_id":"none"}}`, false, want{200, result}, want{200, result}},
		{"tools/call", "delete_everything", `{"name":"delete_everything","arguments":{}}`, false, want{400, invalid}, want{200, invalid}},
		{"server/discover", "", `{}`, false, want{200, result}, want{200, notFound}},
		{"subscriptions/listen", "", `{"notifications":{"toolsListChanged":true,"resourcesListChanged":true}}`, false,
			want{404, notFound}, want{200, notFound}},
		{"resources/list", "", `{}`, false, want{200, result}, want{200, result}},
		{"resources/templates/list", "", `{}`, false, want{200, result}, want{200, result}},
		{"prompts/list", "", `{}`, false, want{200, result}, want{200, result}},
		{"logging/setLevel", "", `{"level":"info"}`, false, want{404, notFound}, want{200, result}},
		{"completion/complete", "", `{"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":"b"}}`, false,
			want{404, notFound}, want{200, notFound}},
		{"frobnicate", "", `{}`, false, want{404, notFound}, want{400, door}},
	}
	for _, rev := range mcpdoor.Revisions {
		for _, row := range rows {
			w := row.legacy
			if rev >= "2026-07-28" {
				w = row.modern
			}
			name := rev + " " + row.method + " " + row.tool
			resp := e.serve(t, e.mcpRequest(tok, rev, row.method, row.tool, rpcRequestBody(rev, row.method, row.params, row.notification)))
			body := resp.Body.Bytes()
			if resp.Code != w.status {
				t.Errorf("%s: HTTP %d %s; want %d", name, resp.Code, body, w.status)
			}
			ct := resp.Header().Get("Content-Type")
			switch w.answer {
			case none:
				if len(body) != 0 {
					t.Errorf("%s: body %q; want none", name, body)
				}
			case door:
				var b struct{ Error, Message string }
				if ct != "application/json" || json.Unmarshal(body, &b) != nil || b.Error != "bad_request" || !strings.Contains(b.Message, row.method) {
					t.Errorf("%s: %s %s; want bad_request naming the method", name, ct, body)
				}
			default:
				var m struct {
					ID     json.RawMessage  `json:"id"`
					Result *json.RawMessage `json:"result"`
					Error  *struct{ Code int }
				}
				if ct != "application/json" || json.Unmarshal(body, &m) != nil || string(m.ID) != "1" {
					t.Errorf("%s: %s %q; want one JSON-RPC answer to id 1", name, ct, body)
					break
				}
				switch {
				case w.answer == result && (m.Result == nil || m.Error != nil):
					t.Errorf("%s: %s; want a result", name, body)
				case w.answer != result && (m.Error == nil || m.Error.Code != w.answer):
					t.Errorf("%s: %s; want JSON-RPC error %d", name, body, w.answer)
				}
			}
			line := e.lastLine(t)
			if line["rpc_method"] != row.method && line["function"] != row.tool {
				t.Errorf("%s: last log line %v is another request's", name, line)
			}
			if got, _ := line["http_status"].(float64); int(got) != resp.Code {
				t.Errorf("%s: log says http_status %v; %d was written", name, line["http_status"], resp.Code)
			}
		}
	}
}

// TestNoListChangedAdvertised: neither revision advertises tools
// listChanged (nor logging): the door is stateless and sends no
// notification. A Go client that would listen for tool changes connects
// without opening subscriptions/listen.
func TestNoListChangedAdvertised(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	tok := e.token("user-a")
	for _, c := range []struct{ rev, method, member string }{
		{"2026-07-28", "server/discover", "capabilities"},
		{"2025-11-25", "initialize", "capabilities"},
	} {
		params := `{}`
		if c.method == "initialize" {
			params = `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`
		}
		resp := e.serve(t, e.mcpRequest(tok, c.rev, c.method, "", rpcRequestBody(c.rev, c.method, params, false)))
		var m struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(resp.Body.Bytes(), &m)
		if got := string(m.Result[c.member]); got != `{"tools":{}}` {
			t.Errorf("%s %s: capabilities %s; want {\"tools\":{}}", c.rev, c.method, got)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "go-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
	hc := &http.Client{Transport: bearer{tok, http.DefaultTransport}}
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.audience, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.logs.String(), `"rpc_method":"subscriptions/listen"`) {
		t.Errorf("a client with a tools-changed handler opened subscriptions/listen:\n%s", e.logs)
	}
}

// TestSDKRefusalsSayWhy: a POST the transport refuses (Accept without
// text/event-stream, another Content-Type, an MCP-Protocol-Version the
// door does not serve) gets the door's short JSON body with a message
// saying what is wrong; the log line has the status written.
func TestSDKRefusalsSayWhy(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	tok := e.token("user-a")
	list := rpcRequestBody("2025-11-25", "tools/list", `{}`, false)
	for _, c := range []struct {
		name, header, value string
		status              int
		says                string
	}{
		{"Accept without text/event-stream", "Accept", "application/json", 400, "text/event-stream"},
		{"Accept without application/json", "Accept", "text/event-stream", 400, "application/json"},
		{"Content-Type", "Content-Type", "text/plain", 415, "application/json"},
		{"a revision not served", "MCP-Protocol-Version", "2025-06-18", 400, "2026-07-28,2025-11-25"},
		{"an unknown revision", "MCP-Protocol-Version", "1999-01-01", 400, "2026-07-28,2025-11-25"},
	} {
		r := e.mcpRequest(tok, "2025-11-25", "tools/list", "", list)
		r.Header.Set(c.header, c.value)
		resp := e.serve(t, r)
		var b struct{ Error, Message string }
		if err := json.Unmarshal(resp.Body.Bytes(), &b); err != nil || resp.Code != c.status ||
			resp.Header().Get("Content-Type") != "application/json" || b.Error == "" || !strings.Contains(b.Message, c.says) {
			t.Errorf("%s: %d %s %s; want %d with a message saying %q", c.name, resp.Code, resp.Header().Get("Content-Type"), resp.Body, c.status, c.says)
		}
		if got, _ := e.lastLine(t)["http_status"].(float64); int(got) != c.status {
			t.Errorf("%s: logged http_status %v; want %d", c.name, got, c.status)
		}
	}
}

// TestInitializeServesTestedRevisions: initialize offering a revision the
// door does not serve (2025-06-18, 2025-03-26, 2024-11-05, an unknown
// one) is answered with 2025-11-25, as the lifecycle's version
// negotiation requires of a server that does not support the offered
// one; server/discover lists the two revisions served.
func TestInitializeServesTestedRevisions(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	tok := e.token("user-a")
	for _, offered := range []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2030-01-01"} {
		params := `{"protocolVersion":"` + offered + `","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`
		resp := e.serve(t, e.mcpRequest(tok, "", "initialize", "", rpcRequestBody("2025-11-25", "initialize", params, false)))
		var m struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if err := json.Unmarshal(resp.Body.Bytes(), &m); err != nil || resp.Code != 200 || m.Result.ProtocolVersion != "2025-11-25" {
			t.Errorf("initialize offering %s: %d %s; want 2025-11-25", offered, resp.Code, resp.Body)
		}
	}
	resp := e.serve(t, e.mcpRequest(tok, "2026-07-28", "server/discover", "", rpcRequestBody("2026-07-28", "server/discover", `{}`, false)))
	var d struct {
		Result struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	_ = json.Unmarshal(resp.Body.Bytes(), &d)
	if strings.Join(d.Result.SupportedVersions, ",") != strings.Join(mcpdoor.Revisions, ",") {
		t.Errorf("server/discover lists %v; want %v", d.Result.SupportedVersions, mcpdoor.Revisions)
	}
}

// TestRequestIDRejectionNamesEachDoorsPlace: a call without a request_id
// is told where its door reads it: params._meta[...] through MCP,
// metadata.request_id through the callback, never the other door's.
func TestRequestIDRejectionNamesEachDoorsPlace(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	_, b := e.post(e.token("user-a"), toolsCall("create_ticket", `{"title":"No key"}`, ""))
	var viaMCP struct {
		Result struct {
			StructuredContent struct {
				Error struct{ Code, Message string }
			} `json:"structuredContent"`
		} `json:"result"`
	}
	_ = json.Unmarshal(b, &viaMCP)
	m := viaMCP.Result.StructuredContent.Error
	if m.Code != core.CodeMissingRequestID || !strings.Contains(m.Message, mcpdoor.RequestIDPlace) || strings.Contains(m.Message, core.RequestIDField) {
		t.Errorf("MCP: %+v; want missing_request_id naming %s only", m, mcpdoor.RequestIDPlace)
	}
	n, err := nonce.Generate(hookKey, nonce.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, e.url+"/callback", strings.NewReader(
		`{"type":"tool_call","function":{"name":"create_ticket","content":{"title":"No key"}},"context":{"externalUserId":"user-a"}}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Request-Nonce", n)
	var cb struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(e.serve(t, r).Body.Bytes(), &cb)
	if cb.Error.Code != core.CodeMissingRequestID || !strings.Contains(cb.Error.Message, core.RequestIDField) || strings.Contains(cb.Error.Message, "_meta") {
		t.Errorf("callback: %+v; want missing_request_id naming %s only", cb.Error, core.RequestIDField)
	}
}

// TestJWKSRedirectToPlainHTTPIsRefused: a JWK Set URL on https (loopback
// here) that redirects to plain http off loopback gives no key: the token
// is not accepted (500: no key can be had) and the log line says why.
func TestJWKSRedirectToPlainHTTPIsRefused(t *testing.T) {
	jwks := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://jwks.example.invalid/keys", http.StatusFound)
	}))
	t.Cleanup(jwks.Close)
	keys := &jwtauth.Keys{JWKSURL: jwks.URL + "/keys", Transport: jwks.Client().Transport}
	e := newEnv(t, memtest.New(), envOptions{keys: keys})
	resp, b := e.post(e.token("user-a"), toolsCall("create_ticket", `{"title":"x"}`, `"req-redirect"`))
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("token through a redirected JWK Set: %d %s; want 500", resp.StatusCode, b)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "https is required except on loopback") {
		t.Errorf("no log line names the refused redirect:\n%s", logs)
	}
	if e.store.calls() != 0 {
		t.Errorf("%d store calls; want none", e.store.calls())
	}
}

// TestUnsupportedRevisionRefusedForEveryMethod: one rule for every
// method, requests and notifications alike, subscriptions/listen (which
// the door answers itself) included: an MCP-Protocol-Version the door does
// not serve (an older revision, an unknown one before or after those
// served) is refused with 400 and a JSON body listing the revisions
// served. A request on a revision from 2026-07-28 on gets JSON-RPC -32022
// with them in its data, which that client's version negotiation reads;
// anything else gets the door's refusal, whose message lists them.
func TestUnsupportedRevisionRefusedForEveryMethod(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	tok := e.token("user-a")
	methods := []struct {
		method, tool, params string
		notification         bool
	}{
		{"initialize", "", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`, false},
		{"notifications/initialized", "", `{}`, true},
		{"notifications/cancelled", "", `{"requestId":1}`, true},
		{"ping", "", `{}`, false},
		{"tools/list", "", `{}`, false},
		{"tools/call", "get_ticket", `{"name":"get_ticket","arguments":{"ticket_id":"none"}}`, false},
		{"server/discover", "", `{}`, false},
		{"subscriptions/listen", "", `{"notifications":{"toolsListChanged":true}}`, false},
		{"subscriptions/listen", "", `{}`, true},
		{"resources/list", "", `{}`, false},
		{"logging/setLevel", "", `{"level":"info"}`, false},
		{"frobnicate", "", `{}`, false},
	}
	supported := strings.Join(mcpdoor.Revisions, ",")
	for _, rev := range []string{"2025-06-18", "2025-03-26", "1999-01-01", "2026-01-01", "2030-01-01", "latest"} {
		for _, m := range methods {
			name := rev + " " + m.method
			if m.notification {
				name += " (notification)"
			}
			r := e.mcpRequest(tok, rev, m.method, m.tool, rpcRequestBody(rev, m.method, m.params, m.notification))
			r.Header.Set("MCP-Protocol-Version", rev) // initialize too: a header sent is checked
			resp := e.serve(t, r)
			body := resp.Body.Bytes()
			if resp.Code != http.StatusBadRequest || resp.Header().Get("Content-Type") != "application/json" {
				t.Errorf("%s: %d %s %s; want 400 application/json", name, resp.Code, resp.Header().Get("Content-Type"), body)
				continue
			}
			if rev >= "2026-07-28" && !m.notification {
				var a struct {
					ID    json.RawMessage `json:"id"`
					Error struct {
						Code int
						Data struct{ Supported []string }
					}
				}
				if json.Unmarshal(body, &a) != nil || string(a.ID) != "1" || a.Error.Code != -32022 ||
					strings.Join(a.Error.Data.Supported, ",") != supported {
					t.Errorf("%s: %s; want JSON-RPC -32022 to id 1 listing %s", name, body, supported)
				}
			} else {
				var b struct{ Error, Message string }
				if json.Unmarshal(body, &b) != nil || b.Error != "bad_request" || !strings.Contains(b.Message, supported) {
					t.Errorf("%s: %s; want bad_request listing %s", name, body, supported)
				}
			}
			if got, _ := e.lastLine(t)["http_status"].(float64); int(got) != http.StatusBadRequest {
				t.Errorf("%s: logged http_status %v; want 400", name, got)
			}
		}
	}
}
