// Package callbacktest builds callback bodies as AIVAX sends them, and the
// users they name, for the tests and benchmarks of every package: one
// definition of the envelope; and the headers an MCP client sends
// (SetMCPHeaders).
package callbacktest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
)

// SameJSON reports whether a and b are the same JSON value, whatever
// their member order and spacing; false when either does not parse.
func SameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, errX := json.Marshal(x)
	yb, errY := json.Marshal(y)
	return errX == nil && errY == nil && string(xb) == string(yb)
}

// Quote is s as a JSON string.
func Quote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always marshals
	}
	return string(b)
}

// Context is a full AIVAX context for user and requestID, with the fields
// that are never part of a key (callSource, conversationToken, moment).
func Context(user, requestID string) string {
	return `{"externalUserId":` + Quote(user) + `,"metadata":{"request_id":` + Quote(requestID) + `},` +
		`"callSource":"ChatCompletionsApi","conversationToken":"conv-123","moment":"2026-11-10T12:00:00.1234567+00:00"}`
}

// Body is a tool_call of function with arguments (JSON text) and context
// (JSON text, left out when "").
func Body(function, arguments, context string) string {
	b := `{"type":"tool_call","function":{"name":` + Quote(function) + `,"content":` + arguments + `}`
	if context != "" {
		b += `,"context":` + context
	}
	return b + "}"
}

// Users are the users the tests' callbacks name by external user ID: two
// of tenant-a, one of tenant-b and a disabled one of tenant-a.
var Users = memstore.Users{
	"user-a": {TenantID: "tenant-a", UserID: "alice"},
	"user-b": {TenantID: "tenant-a", UserID: "bob"},
	"user-c": {TenantID: "tenant-b", UserID: "carol"},
	"user-d": {TenantID: "tenant-a", UserID: "dave", Disabled: true},
}

// Create is a create_ticket call of user with requestID and arguments.
func Create(user, requestID, arguments string) string {
	return Body("create_ticket", arguments, Context(user, requestID))
}

// Arguments are typical create_ticket arguments (a title, a description
// and a priority): the call the benchmarks measure.
const Arguments = `{"title":"Cannot sign in","description":"The login page loops after a password reset.","priority":"high"}`

// Title is create_ticket arguments with only a title.
func Title(title string) string { return `{"title":` + Quote(title) + `}` }

// Call is one callback of a metrics test: its name, the nonce it carries
// ("" for none) and its body.
type Call struct{ Name, Nonce, Body string }

// MetricsHookKey is the hook key of the metrics tests' programs.
const MetricsHookKey = "metrics-test-hook-key"

// MetricsSecrets are what FourCalls carry that no metric may: tenant,
// user, external user and title.
var MetricsSecrets = []string{"tenant-a", "alice", "user-a", "Cannot sign in"}

// FourCalls are one create, its repeat, one rejection and one 401 for
// user-a, nonced with MetricsHookKey: the calls every program's metrics
// test counts by the same labels.
func FourCalls(t testing.TB) []Call {
	t.Helper()
	n, err := nonce.Generate(MetricsHookKey, 4)
	if err != nil {
		t.Fatal(err)
	}
	create := Create("user-a", "metrics-r-1", Title("Cannot sign in"))
	bad := `{"type":"tool_call","function":{"name":"create_ticket","content":{"title":""}},` +
		`"context":{"externalUserId":"user-a","metadata":{"request_id":"metrics-r-2"}}}`
	return []Call{{"create", n, create}, {"repeat", n, create}, {"rejection", n, bad}, {"401", "", create}}
}

// Send sends body to url as AIVAX does (JSON) with the nonce n in
// X-Request-Nonce ("" for none), and returns the status and the body of
// the answer; a request that cannot be made or sent fails the test.
func Send(t testing.TB, method, url, n, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if n != "" {
		req.Header.Set("X-Request-Nonce", n)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// SetMCPHeaders sets on r the headers a 2025-11-25 MCP client sends with
// a message, with token as the bearer when not empty.
func SetMCPHeaders(r *http.Request, token string) {
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
}
