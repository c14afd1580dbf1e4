package mcpdoor_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// TestBadInput: each bad tools/call of the contract gets its answer and
// writes nothing. The request_id rules are section 3 step 6's, applied to
// params._meta["io.github.aivax-examples/request_id"].
func TestBadInput(t *testing.T) {
	e := newEnv(t, memtest.New(), envOptions{})
	tok := e.token("user-a")
	good := `{"title":"Bad input"}`
	cases := []struct {
		name, body, code string
	}{
		{"no _meta", toolsCall("create_ticket", good, ""), core.CodeMissingRequestID},
		{"request_id in the arguments only", toolsCall("create_ticket", `{"title":"x","request_id":"r"}`, ""), core.CodeMissingRequestID},
		{"empty request_id", toolsCall("create_ticket", good, `""`), core.CodeMissingRequestID},
		{"null request_id", toolsCall("create_ticket", good, `null`), core.CodeMissingRequestID},
		{"number request_id", toolsCall("create_ticket", good, `42`), core.CodeInvalidRequestID},
		{"object request_id", toolsCall("create_ticket", good, `{"id":"r"}`), core.CodeInvalidRequestID},
		{"too long", toolsCall("create_ticket", good, `"`+strings.Repeat("r", core.MaxRequestIDLen+1)+`"`), core.CodeInvalidRequestID},
		{"control character", toolsCall("create_ticket", good, `"req\u0007"`), core.CodeInvalidRequestID},
		{"lone surrogate", toolsCall("create_ticket", good, `"req\ud800"`), core.CodeInvalidRequestID},
		{"no title", toolsCall("create_ticket", `{}`, `"req-bad-args"`), core.CodeInvalidArguments},
		{"no arguments", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_ticket","_meta":{"io.github.aivax-examples/request_id":"r"}}}`, core.CodeInvalidArguments},
		{"unknown member", toolsCall("create_ticket", `{"title":"x","assignee":"bob"}`, `"req-bad-args"`), core.CodeInvalidArguments},
		{"title not a string", toolsCall("create_ticket", `{"title":7}`, `"req-bad-args"`), core.CodeInvalidArguments},
		{"bad priority", toolsCall("create_ticket", `{"title":"x","priority":"now"}`, `"req-bad-args"`), core.CodeInvalidArguments},
		{"duplicate member", toolsCall("create_ticket", `{"title":"x","title":"y"}`, `"req-bad-args"`), core.CodeInvalidArguments},
		{"get_ticket without id", toolsCall("get_ticket", `{}`, ""), core.CodeInvalidArguments},
	}
	for _, c := range cases {
		resp, b := e.post(tok, c.body)
		if resp.StatusCode != 200 {
			t.Errorf("%s: HTTP %d %s", c.name, resp.StatusCode, b)
			continue
		}
		r := decodeRPC(t, b)
		if r.Result == nil {
			t.Errorf("%s: %s; want a tool result", c.name, b)
			continue
		}
		var a answer
		_ = json.Unmarshal(r.Result.StructuredContent, &a)
		if a.Status != "rejected" || a.Error.Code != c.code || !r.Result.IsError {
			t.Errorf("%s: %s; want rejected %s with isError", c.name, b, c.code)
		}
		if len(r.Result.Content) != 1 || !callbacktest.SameJSON([]byte(r.Result.Content[0].Text), r.Result.StructuredContent) {
			t.Errorf("%s: content %+v is not the structured content's text", c.name, r.Result.Content)
		}
	}
	if got := e.store.creates.Load(); got != 0 {
		t.Errorf("%d store transactions for bad input; want none", got)
	}
	// An unknown tool is a JSON-RPC error, and a batch a 400: nothing
	// written either.
	resp, b := e.post(tok, toolsCall("delete_everything", good, `"req-x"`))
	if r := decodeRPC(t, b); resp.StatusCode != 200 || r.Error == nil || r.Result != nil {
		t.Errorf("unknown tool: %d %s; want a JSON-RPC error", resp.StatusCode, b)
	}
	batch := "[" + toolsCall("create_ticket", good, `"req-batch"`) + "]"
	if resp, b := e.post(tok, batch); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("batch: %d %s; want 400", resp.StatusCode, b)
	}
	for _, junk := range []string{"", "{", "null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}`} {
		if resp, b := e.post(tok, junk); resp.StatusCode == 200 && strings.Contains(string(b), `"result"`) {
			t.Errorf("junk %q: %d %s", junk, resp.StatusCode, b)
		}
	}
	if got := e.store.calls(); got != 0 {
		t.Errorf("%d store calls; want none", got)
	}
	// Two different request_ids never share a key: a lone surrogate is not
	// U+FFFD.
	r1 := decodeRPC(t, second(e.post(tok, toolsCall("create_ticket", good, `"req-\ufffd"`))))
	var a1 answer
	_ = json.Unmarshal(r1.Result.StructuredContent, &a1)
	if a1.Status != "created" || a1.Deduplicated {
		t.Errorf("request_id with U+FFFD: %+v", a1)
	}
}

func second[A, B any](_ A, b B) B { return b }
