package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// response is how one outcome kind is answered.
type response struct {
	status int
	name   string // the body's "status" field and the log's outcome
	// body appends the JSON body to b. The bodies of the hot paths are
	// written by hand, byte for byte what encoding/json would write for
	// them (TestBodiesMatchEncodingJSON), without reflection.
	body func(b []byte, o core.Outcome) ([]byte, error)
}

// responses is the one table from domain outcome to HTTP response (SPEC
// section 6). Bodies of 4xx and 5xx carry no detail: AIVAX shows the model
// only 2xx bodies.
var responses = map[core.Kind]response{
	core.KindCreated: {http.StatusOK, "created", func(b []byte, o core.Outcome) ([]byte, error) {
		b = append(b, `{"status":"created","ticket_id":`...)
		b = appendString(b, o.TicketID)
		return append(b, `,"deduplicated":false}`...), nil
	}},
	core.KindDuplicate: {http.StatusOK, "deduplicated", func(b []byte, o core.Outcome) ([]byte, error) {
		return appendReplay(b, o.Result)
	}},
	core.KindFound: {http.StatusOK, "found", func(b []byte, o core.Outcome) ([]byte, error) {
		return appendMarshal(b, struct {
			Status string           `json:"status"`
			Ticket *core.TicketView `json:"ticket"`
		}{"found", o.Ticket})
	}},
	core.KindInProgress:       {http.StatusOK, "in_progress", retryable("in_progress")},
	core.KindBusy:             {http.StatusOK, "busy", retryable("busy")},
	core.KindRejected:         {http.StatusOK, "rejected", rejection},
	core.KindConflict:         {http.StatusForbidden, "rejected", rejection},
	core.KindUnauthenticated:  {http.StatusUnauthorized, "unauthenticated", short("unauthenticated")},
	core.KindForbidden:        {http.StatusForbidden, "forbidden", short("forbidden")},
	core.KindBadRequest:       {http.StatusBadRequest, "bad_request", short("bad_request")},
	core.KindTooLarge:         {http.StatusRequestEntityTooLarge, "too_large", short("too_large")},
	core.KindNotFound:         {http.StatusNotFound, "not_found", short("not_found")},
	core.KindMethodNotAllowed: {http.StatusMethodNotAllowed, "method_not_allowed", short("method_not_allowed")},
	core.KindInternal:         {http.StatusInternalServerError, "internal", short("internal")},
}

func lookup(k core.Kind) response {
	if r, ok := responses[k]; ok {
		return r
	}
	return responses[core.KindInternal]
}

func retryable(status string) func([]byte, core.Outcome) ([]byte, error) {
	head := `{"status":"` + status + `","retryable":true,"message":`
	return func(b []byte, o core.Outcome) ([]byte, error) {
		b = append(b, head...)
		b = appendString(b, o.Message)
		return append(b, '}'), nil
	}
}

func rejection(b []byte, o core.Outcome) ([]byte, error) {
	b = append(b, `{"status":"rejected","error":{"code":`...)
	b = appendString(b, o.Code)
	b = append(b, `,"message":`...)
	b = appendString(b, o.Message)
	return append(b, "}}"...), nil
}

// short is the body of an error the model never sees: a fixed word.
func short(code string) func([]byte, core.Outcome) ([]byte, error) {
	body := `{"error":"` + code + `"}`
	return func(b []byte, _ core.Outcome) ([]byte, error) { return append(b, body...), nil }
}

// appendReplay appends the stored result plus "deduplicated": true.
func appendReplay(b []byte, stored []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(stored, &m); err != nil || m == nil {
		// The service has already read this result, so only a store that
		// changed it under us gets here: writeRow answers 500.
		return nil, errStoredResult
	}
	m["deduplicated"] = json.RawMessage("true")
	return appendMarshal(b, m)
}

var errStoredResult = errors.New("stored result is not a JSON object")

func appendMarshal(b []byte, v any) ([]byte, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

// appendString appends s as encoding/json writes a string (HTML-safe
// escaping included): printable ASCII other than '"', '\\', '<', '>' and
// '&' as is, and anything else through encoding/json itself.
func appendString(b []byte, s string) []byte {
	if isPlainASCII(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	out, _ := json.Marshal(s) // a string always marshals
	return append(b, out...)
}

// isPlainASCII reports whether encoding/json writes s unchanged between
// quotes.
func isPlainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// write sends the response for o and returns the table row it used.
func write(w http.ResponseWriter, o core.Outcome) response {
	return writeRow(w, lookup(o.Kind), o)
}

func writeRow(w http.ResponseWriter, r response, o core.Outcome) response {
	b, err := r.body(make([]byte, 0, 256), o)
	if err != nil {
		r = responses[core.KindInternal]
		b, _ = r.body(b[:0], o)
	}
	// Both header values in one allocation; each slice is full, so an
	// Add to either copies instead of writing into the other.
	values := []string{"application/json", "no-store"}
	h := w.Header()
	h["Content-Type"] = values[0:1:1]
	h["Cache-Control"] = values[1:2:2]
	w.WriteHeader(r.status)
	_, _ = w.Write(append(b, '\n'))
	return r
}
