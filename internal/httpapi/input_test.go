package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// inputHarness is a handler without authentication on an in-memory store,
// whose calls it counts (memtest.Store.Calls), with the log lines captured.
type inputHarness struct {
	h     *httpapi.Handler
	store *memtest.Store
	logs  bytes.Buffer
}

func newInputHarness() *inputHarness {
	e := &inputHarness{store: memtest.New()}
	var ids atomic.Int64
	e.h = newHandler(e.store, nonce.Off{}, time.Hour, slog.New(slog.NewJSONHandler(&e.logs, nil)))
	// Two users of two tenants, each under its own external user ID.
	e.h.Service.Users = memstore.Users{
		"user-a": {TenantID: "tenant-a", UserID: "alice"},
		"user-b": {TenantID: "tenant-b", UserID: "bob"},
	}
	e.h.Service.NewID = func() string { return fmt.Sprintf("ticket-%d", ids.Add(1)) }
	return e
}

// post sends body to target and returns the status and the decoded body.
func (e *inputHarness) post(t *testing.T, target, body string) (int, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, httptest.NewRequest("POST", target, strings.NewReader(body)))
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	return w.Code, m
}

func rejectionCode(m map[string]any) string {
	if e, ok := m["error"].(map[string]any); ok && m["status"] == "rejected" {
		code, _ := e["code"].(string)
		return code
	}
	return ""
}

// Member names match exactly: a case variant is an unknown field, ignored,
// and never overrides the real member, wherever it stands.
func TestExactMemberNames(t *testing.T) {
	body := `{"type":"tool_call",
	  "function":{"name":"create_ticket","content":{"title":"real"},"Content":{"title":"variant"},"NAME":"get_ticket"},
	  "context":{"externalUserId":"user-a","EXTERNALUSERID":"user-b","ExternalUserId":"user-b",
	             "metadata":{"request_id":"r-real","Request_ID":"r-variant","REQUEST_ID":"r-variant"},
	             "Metadata":{"request_id":"r-variant"}},
	  "Context":{"externalUserId":"user-b"}}`
	c, err := httpapi.ParseCall([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if c.Function != core.CreateTicket || c.ExternalUserID != "user-a" || c.RequestID != "r-real" ||
		string(c.Content) != `{"title":"real"}` {
		t.Fatalf("ParseCall took a case variant: %+v (content %s)", c, c.Content)
	}

	// The key is the one of the exact members: the same as for the body
	// without the variants.
	e := newInputHarness()
	code, m := e.post(t, "/callback", body)
	plain := `{"function":{"name":"create_ticket","content":{"title":"real"}},
	  "context":{"externalUserId":"user-a","metadata":{"request_id":"r-real"}}}`
	code2, m2 := e.post(t, "/callback", plain)
	if code != 200 || m["status"] != "created" || code2 != 200 || m2["deduplicated"] != true || m2["ticket_id"] != m["ticket_id"] {
		t.Fatalf("with variants %d %v, without %d %v: want one operation", code, m, code2, m2)
	}

	// Variants alone are absent members.
	for _, tc := range []struct{ body, want string }{
		{`{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"EXTERNALUSERID":"user-a","metadata":{"request_id":"r"}}}`,
			core.CodeMissingExternalUserID},
		{`{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":"user-a","metadata":{"Request_ID":"r"}}}`,
			core.CodeMissingRequestID},
		{`{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":"user-a","METADATA":{"request_id":"r"}}}`,
			core.CodeMissingRequestID},
	} {
		code, m := e.post(t, "/callback", tc.body)
		if code != 200 || rejectionCode(m) != tc.want {
			t.Errorf("%s: %d %v, want rejection %s", tc.body, code, m, tc.want)
		}
	}
	if _, err := httpapi.ParseCall([]byte(`{"function":{"Name":"create_ticket","content":{}}}`)); err == nil {
		t.Error(`"Name" accepted as function.name`)
	}
	if _, err := httpapi.ParseCall([]byte(`{"function":{"name":"create_ticket","Content":{}}}`)); err == nil {
		t.Error(`"Content" accepted as function.content`)
	}
	if n := e.store.Calls(); n != 2 {
		t.Errorf("store calls = %d, want 2 (the two creates above)", n)
	}
}

// A request_id that is not well-formed Unicode is invalid_request_id, and
// nothing is written: a decoder that turned it into U+FFFD would give
// different request_ids one key.
func TestRequestIDMustBeWellFormed(t *testing.T) {
	e := newInputHarness()
	for _, rid := range []string{`"\ud800"`, `"\udc00"`, `"a\ud800b"`, `"\ud800\ud800"`, `"\udc00\ud800"`,
		"\"a\xffb\"", "\"\xed\xa0\x80\"", `"\ufffd"`} {
		body := `{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":"user-a","metadata":{"request_id":` + rid + `}}}`
		code, m := e.post(t, "/callback", body)
		if rid == `"\ufffd"` { // the replacement character itself is a valid request_id
			if code != 200 || m["status"] != "created" {
				t.Errorf("request_id U+FFFD: %d %v, want created", code, m)
			}
			continue
		}
		if code != 200 || rejectionCode(m) != core.CodeInvalidRequestID {
			t.Errorf("request_id %q: %d %v, want invalid_request_id", rid, code, m)
		}
	}
	// A proper surrogate pair is a character like any other.
	body := `{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":"user-a","metadata":{"request_id":"\ud83d\ude00"}}}`
	if code, m := e.post(t, "/callback", body); code != 200 || m["status"] != "created" {
		t.Errorf("surrogate pair: %d %v, want created", code, m)
	}
	if n := e.store.Calls(); n != 2 {
		t.Errorf("store calls = %d, want 2 (U+FFFD and the pair)", n)
	}
}

// An externalUserId that is not well-formed Unicode names no user: 403
// without a lookup, never the user whose id has U+FFFD in its place.
func TestExternalUserIDMustBeWellFormed(t *testing.T) {
	e := newInputHarness()
	e.h.Service.Users = memstore.Users{"user-\ufffd": {TenantID: "tenant-a", UserID: "alice"}}
	for _, id := range []string{`"user-\ud800"`, "\"user-\xff\""} {
		body := `{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":` + id + `,"metadata":{"request_id":"r"}}}`
		if code, m := e.post(t, "/callback", body); code != 403 {
			t.Errorf("externalUserId %q: %d %v, want 403", id, code, m)
		}
	}
	if n := e.store.Calls(); n != 0 {
		t.Errorf("store calls = %d, want 0", n)
	}
}

// A function.content that is present but not an object is a correctable
// argument error the model sees (200 invalid_arguments), not a 400.
func TestNonObjectContentIsInvalidArguments(t *testing.T) {
	e := newInputHarness()
	for _, fn := range []string{core.CreateTicket, core.GetTicket} {
		for _, content := range []string{`null`, `"{\"title\":\"t\"}"`, `[]`, `[{"title":"t"}]`, `42`, `true`} {
			body := `{"function":{"name":"` + fn + `","content":` + content + `},"context":{"externalUserId":"user-a","metadata":{"request_id":"r"}}}`
			code, m := e.post(t, "/callback", body)
			msg, _ := m["error"].(map[string]any)["message"].(string)
			if code != 200 || rejectionCode(m) != core.CodeInvalidArguments || !strings.Contains(msg, "must be a JSON object") {
				t.Errorf("%s content %s: %d %v, want 200 invalid_arguments saying it must be an object", fn, content, code, m)
			}
		}
	}
	// Earlier checks still come first: an unknown user is 403.
	body := `{"function":{"name":"create_ticket","content":null},"context":{"externalUserId":"nobody","metadata":{"request_id":"r"}}}`
	if code, m := e.post(t, "/callback", body); code != 403 {
		t.Errorf("unknown user with null content: %d %v, want 403", code, m)
	}
	// A missing content is still not the shape of a callback.
	if code, m := e.post(t, "/callback", `{"function":{"name":"create_ticket"},"context":{"externalUserId":"user-a"}}`); code != 400 {
		t.Errorf("missing content: %d %v, want 400", code, m)
	}
	if n := e.store.Calls(); n != 0 {
		t.Errorf("store calls = %d, want 0", n)
	}
}

// The log line clips what the caller chose: the path and the function
// name.
func TestLogLineClipsCallerValues(t *testing.T) {
	e := newInputHarness()
	long := strings.Repeat("é", 5000)
	e.post(t, "/callback", `{"function":{"name":"`+long+`","content":{}},"context":{"externalUserId":"user-a"}}`)
	e.post(t, "/"+strings.Repeat("p", 5000), `{}`)
	lines := strings.Split(strings.TrimSpace(e.logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log lines = %d, want 2:\n%s", len(lines), e.logs.String())
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"path", "function"} {
			v, _ := m[k].(string)
			if len(v) > httpapi.MaxLoggedLen || strings.ContainsRune(v, '\ufffd') {
				t.Errorf("%s logged as %d bytes (%q…), want at most %d, cut on a character boundary", k, len(v), v[:min(len(v), 20)], httpapi.MaxLoggedLen)
			}
		}
		if len(l) > 1024 {
			t.Errorf("log line of %d bytes", len(l))
		}
	}
	if !strings.Contains(lines[0], `"function":"éé`) || !strings.Contains(lines[0], `…"`) {
		t.Errorf("clipped function name not marked: %s", lines[0])
	}
}

// A member repeated in the envelope: the last occurrence wins whole, as in
// JavaScript (an object is replaced, not merged). Repeated names inside the
// arguments stay invalid_arguments.
func TestRepeatedEnvelopeMembersLastWins(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		user, rid  string
		fn         string
		shapeError bool
	}{
		{"externalUserId", `{"function":{"name":"create_ticket","content":{}},"context":{"externalUserId":"user-a","externalUserId":"user-b","metadata":{"request_id":"r"}}}`,
			"user-b", "r", core.CreateTicket, false},
		{"context replaced, not merged", `{"function":{"name":"create_ticket","content":{}},"context":{"externalUserId":"user-a","metadata":{"request_id":"r"}},"context":{"externalUserId":"user-b"}}`,
			"user-b", "", core.CreateTicket, false},
		{"metadata replaced, not merged", `{"function":{"name":"create_ticket","content":{}},"context":{"externalUserId":"user-a","metadata":{"request_id":"r"},"metadata":{}}}`,
			"user-a", "", core.CreateTicket, false},
		{"context then null", `{"function":{"name":"create_ticket","content":{}},"context":{"externalUserId":"user-a"},"context":null}`,
			"", "", core.CreateTicket, false},
		{"function replaced, not merged", `{"function":{"name":"create_ticket","content":{}},"function":{"name":"get_ticket"}}`,
			"", "", "", true},
		{"request_id then null", `{"function":{"name":"create_ticket","content":{}},"context":{"externalUserId":"user-a","metadata":{"request_id":"r","request_id":null}}}`,
			"user-a", "", core.CreateTicket, false},
	} {
		c, err := httpapi.ParseCall([]byte(tc.body))
		if tc.shapeError {
			if err == nil {
				t.Errorf("%s: accepted %+v, want a shape error", tc.name, c)
			}
			continue
		}
		if err != nil || c.ExternalUserID != tc.user || c.RequestID != tc.rid || c.Function != tc.fn {
			t.Errorf("%s: %+v, %v; want user %q request_id %q", tc.name, c, err, tc.user, tc.rid)
		}
	}
	e := newInputHarness()
	code, m := e.post(t, "/callback", `{"function":{"name":"create_ticket","content":{"title":"a","title":"b"}},"context":{"externalUserId":"user-a","metadata":{"request_id":"r"}}}`)
	if code != 200 || rejectionCode(m) != core.CodeInvalidArguments {
		t.Errorf("repeated argument name: %d %v, want invalid_arguments", code, m)
	}
}
