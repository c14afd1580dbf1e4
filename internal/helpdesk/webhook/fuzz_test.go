package webhook

import (
	"encoding/json"
	"testing"
)

// FuzzReceipt: any 2xx body yields a receipt with an external id; a JSON
// object's non-empty string "id" is taken as it is.
func FuzzReceipt(f *testing.F) {
	for _, s := range []string{``, `ok`, `{}`, `{"id":"WH-1","url":"https://x/1"}`, `{"id":12}`,
		`{"id":1e400}`, `{"id":-0.5}`, `{"id":null}`, `[1]`, `{"id":"a"}{"id":"b"}`, `{"url":{"a":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := receipt("ticket-1", body)
		if r.ExternalID == "" {
			t.Fatalf("empty external id for %q", body)
		}
		var obj struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(body, &obj) == nil {
			if s, ok := obj.ID.(string); ok && s != "" && r.ExternalID != s {
				t.Fatalf("id %q read as %q", s, r.ExternalID)
			}
		}
	})
}
