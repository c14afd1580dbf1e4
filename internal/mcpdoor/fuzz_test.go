package mcpdoor_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// FuzzJSONRPCBody: whatever the body of an authenticated POST /mcp, the
// door answers (never a 5xx, never a panic), and the answer is JSON. A
// body that creates a ticket is a tools/call of create_ticket whose
// answer says created.
func FuzzJSONRPCBody(f *testing.F) {
	for _, s := range []string{
		toolsCall("create_ticket", `{"title":"Fuzz"}`, `"req-fuzz"`),
		toolsCall("create_ticket", `{"title":"Fuzz"}`, `"req\ud800"`),
		toolsCall("get_ticket", `{"ticket_id":"t"}`, ""),
		toolsCall("nope", `{}`, `1`),
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{`, ``, `null`,
	} {
		f.Add(s)
	}
	e := newEnv(f, memtest.New(), envOptions{})
	tok := e.token("user-a")
	f.Fuzz(func(t *testing.T, body string) {
		e.t = t
		before := e.store.created.Load()
		resp, b := e.post(tok, body)
		if resp.StatusCode >= 500 {
			t.Fatalf("body %q: %d %s", body, resp.StatusCode, b)
		}
		if len(b) > 0 && !json.Valid(b) {
			t.Fatalf("body %q: answer is not JSON: %q", body, b)
		}
		if e.store.created.Load() != before {
			var r rpcResult
			if json.Unmarshal(b, &r) != nil || r.Result == nil || r.Result.IsError || resp.StatusCode != http.StatusOK {
				t.Fatalf("body %q created a ticket but answered %d %s", body, resp.StatusCode, b)
			}
		}
	})
}
