package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// referenceBody is how the bodies were written before they were written by
// hand: encoding/json on these values. The hand-written bodies must stay
// byte for byte the same.
func referenceBody(o core.Outcome) any {
	switch o.Kind {
	case core.KindCreated:
		return struct {
			Status       string `json:"status"`
			TicketID     string `json:"ticket_id"`
			Deduplicated bool   `json:"deduplicated"`
		}{"created", o.TicketID, false}
	case core.KindDuplicate:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(o.Result, &m); err != nil {
			return json.RawMessage(`{"error":"internal"}`)
		}
		m["deduplicated"] = json.RawMessage("true")
		return m
	case core.KindFound:
		return struct {
			Status string           `json:"status"`
			Ticket *core.TicketView `json:"ticket"`
		}{"found", o.Ticket}
	case core.KindInProgress, core.KindBusy:
		return struct {
			Status    string `json:"status"`
			Retryable bool   `json:"retryable"`
			Message   string `json:"message"`
		}{lookup(o.Kind).name, true, o.Message}
	case core.KindRejected, core.KindConflict:
		type errorBody struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		return struct {
			Status string    `json:"status"`
			Error  errorBody `json:"error"`
		}{"rejected", errorBody{o.Code, o.Message}}
	}
	return json.RawMessage(`{"error":"` + lookup(o.Kind).name + `"}`)
}

// TestBodiesMatchEncodingJSON: every row of the table, with texts that
// need every kind of escaping encoding/json does (HTML characters, U+2028,
// control characters, invalid UTF-8) and stored results in and out of the
// shape the service writes.
func TestBodiesMatchEncodingJSON(t *testing.T) {
	texts := []string{"", "ticket-1", "0f8e4a52-5a3b-4a0b-9d7e-0b5f3c1e2d4a", "plain text; with (punctuation)!",
		`quote " and \ backslash`, "<b>&amp;</b>", "line\nbreak\ttab\x00nul\x1f\x7f", "\u2028\u2029",
		"é 😂 …", "bad \xff utf-8", "There is no function named \"x\" here; call create_ticket instead.", "~`{}[]"}
	var outcomes []core.Outcome
	for k := core.KindInternal; k <= core.KindMethodNotAllowed+1; k++ {
		for _, s := range texts {
			outcomes = append(outcomes, core.Outcome{Kind: k, TicketID: s, Message: s, Code: s,
				Ticket: &core.TicketView{TicketID: s, Title: s, Description: s, Priority: "normal", CreatedAt: s}})
		}
	}
	for _, stored := range []string{
		`{"status":"created","ticket_id":"ticket-1"}`,
		`{"status":"created","ticket_id":"0f8e4a52-5a3b-4a0b-9d7e-0b5f3c1e2d4a"}`,
		`{"status":"created","ticket_id":""}`,
		`{"status":"created","ticket_id":"a<b"}`,
		`{"status":"created","ticket_id":"a\"b"}`,
		`{"status":"created","ticket_id":"a\u00e9"}`,
		`{"status":"created","ticket_id":"x","deduplicated":false}`,
		`{"status":"created", "ticket_id":"x"}`,
		`{"ticket_id":"x","status":"created"}`,
		`{"status":"created","ticket_id":"x"}` + " ",
		`{"status":"created","ticket_id":"x"},"y":"z"}`,
		`{"status":"created","ticket_id":"x"`,
		`{"status":"created","ticket_id":"}`,
		`{"status":"created","ticket_id":"`,
		`not json`,
		``,
	} {
		outcomes = append(outcomes, core.Outcome{Kind: core.KindDuplicate, Result: []byte(stored)})
	}
	for _, o := range outcomes {
		want, err := json.Marshal(referenceBody(o))
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		write(w, o)
		if got := w.Body.String(); got != string(want)+"\n" {
			t.Errorf("kind %d, %+q:\n got %s\nwant %s", o.Kind, o.Message+string(o.Result), got, want)
		}
		if ct, cc := w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
			t.Errorf("headers %q %q", ct, cc)
		}
	}
}
