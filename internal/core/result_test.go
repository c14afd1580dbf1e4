package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// The hand-written stored result reads and writes exactly as encoding/json
// on createdResult.
func TestCreatedResultMatchesEncodingJSON(t *testing.T) {
	ids := []string{"ticket-1", "0f8e4a52-5a3b-4a0b-9d7e-0b5f3c1e2d4a", "", "a<b", `a"b`, `a\b`, "é", "\u2028", "x\x00", "bad\xff"}
	for _, id := range ids {
		got, err := marshalCreated(id)
		want, wantErr := json.Marshal(createdResult{Status: "created", TicketID: id})
		if !bytes.Equal(got, want) || err != wantErr {
			t.Errorf("marshalCreated(%q) = %s, %v; encoding/json %s, %v", id, got, err, want, wantErr)
		}
	}
	stored := []string{`{"status":"created","ticket_id":"ticket-1"}`, `{"status":"created","ticket_id":""}`,
		`{"status":"created","ticket_id":"a\u003cb"}`, `{"status":"created","ticket_id":"a\"b"}`,
		`{"status":"created","ticket_id":"x"}"}`, `{"status":"created","ticket_id":"x","deduplicated":true}`,
		`{"ticket_id":"x"}`, `{"status":"created","ticket_id":1}`, `{"status":"created","ticket_id":"`, `{"status":"created","ticket_id":"}`, `"}`, ``, `null`}
	for _, s := range stored {
		got, err := unmarshalCreated([]byte(s))
		var r createdResult
		wantErr := json.Unmarshal([]byte(s), &r)
		if got != r.TicketID || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Errorf("unmarshalCreated(%s) = %q, %v; encoding/json %q, %v", s, got, err, r.TicketID, wantErr)
		}
	}
}
