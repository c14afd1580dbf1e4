package httpapi

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// TestAnswers: every row of the response table, and the refusals only
// HTTP produces, answered with the literal status and bytes expected,
// including texts that need escaping.
func TestAnswers(t *testing.T) {
	body := func(k core.Kind, b string) core.Outcome { return core.Outcome{Kind: k, Body: []byte(b)} }
	for _, tc := range []struct {
		name   string
		rep    reply
		status int
		body   string
	}{
		// A tool's own answer is sent as the tool encoded it, whatever
		// its members, compacted and with <, > and & escaped as every
		// body is.
		{"created", answer(body(core.KindCreated, `{"status":"created","ticket_id":"t-1","deduplicated":false}`)),
			200, `{"status":"created","ticket_id":"t-1","deduplicated":false}`},
		{"duplicate", answer(body(core.KindDuplicate, `{"status":"created","ticket_id":"t-1","deduplicated":true}`)),
			200, `{"status":"created","ticket_id":"t-1","deduplicated":true}`},
		{"another tool's members", answer(body(core.KindCreated, `{"status":"created", "note_id":"n-1","words":[1, 2]}`)),
			200, `{"status":"created","note_id":"n-1","words":[1,2]}`},
		{"created without its body", answer(core.Outcome{Kind: core.KindCreated}), 500, `{"error":"internal"}`},
		{"duplicate without its body", answer(core.Outcome{Kind: core.KindDuplicate}), 500, `{"error":"internal"}`},
		{"found", answer(body(core.KindFound, `{"status":"found","ticket":{"ticket_id":"t-1","title":"<b>&amp;</b>","description":"line\nbreak \u2028"}}`)), 200,
			`{"status":"found","ticket":{"ticket_id":"t-1","title":"\u003cb\u003e\u0026amp;\u003c/b\u003e","description":"line\nbreak \u2028"}}`},
		{"found without its body", answer(core.Outcome{Kind: core.KindFound}), 500, `{"error":"internal"}`},
		{"a body that is not JSON", answer(body(core.KindFound, `{"status":"found",`)), 500, `{"error":"internal"}`},
		{"in progress", answer(core.Outcome{Kind: core.KindInProgress, Message: `wait "a" bit`}), 200,
			`{"status":"in_progress","retryable":true,"message":"wait \"a\" bit"}`},
		{"busy", answer(core.Outcome{Kind: core.KindBusy, Message: "again", Err: core.ErrBusy}), 200,
			`{"status":"busy","retryable":true,"message":"again"}`},
		{"rejected", answer(core.Reject(core.CodeInvalidArguments, "fix \x00 it")), 200,
			`{"status":"rejected","error":{"code":"invalid_arguments","message":"fix \u0000 it"}}`},
		{"conflict", answer(core.Outcome{Kind: core.KindConflict, Code: core.CodeRequestIDConflict, Message: "m"}), 403,
			`{"status":"rejected","error":{"code":"request_id_conflict","message":"m"}}`},
		{"forbidden", answer(core.Outcome{Kind: core.KindForbidden}), 403, `{"error":"forbidden"}`},
		{"internal, no detail", answer(core.Outcome{Kind: core.KindInternal, Err: errors.New("SECRET")}), 500, `{"error":"internal"}`},
		{"unknown kind", answer(core.Outcome{Kind: core.Kind(99)}), 500, `{"error":"internal"}`},
		{"bad request", refuse(ResponseBadRequest, errors.New("SECRET")), 400, `{"error":"bad_request"}`},
		{"too large", refuse(ResponseTooLarge, nil), 413, `{"error":"too_large"}`},
		{"unauthenticated", refuse(ResponseUnauthenticated, nil), 401, `{"error":"unauthenticated"}`},
		{"not found", refuse(ResponseNotFound, nil), 404, `{"error":"not_found"}`},
		{"method not allowed", refuse(ResponseMethodNotAllowed, nil), 405, `{"error":"method_not_allowed"}`},
		{"body that does not encode", reply{response: Responses[core.KindFound], body: func() {}}, 500, `{"error":"internal"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			sent := write(w, tc.rep)
			if w.Code != tc.status || w.Body.String() != tc.body+"\n" {
				t.Fatalf("answered %d %s; want %d %s", w.Code, w.Body, tc.status, tc.body)
			}
			if sent.Status != tc.status {
				t.Fatalf("write reports status %d; sent %d", sent.Status, w.Code)
			}
			if ct, cc := w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
				t.Fatalf("headers %q %q", ct, cc)
			}
		})
	}
}
