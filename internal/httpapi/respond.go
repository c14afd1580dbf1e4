package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// response is how one outcome kind is answered.
type response struct {
	status int
	name   string // the body's "status" field and the log's outcome
	body   func(o core.Outcome) any
}

// responses is the one table from domain outcome to HTTP response (SPEC
// section 6). Bodies of 4xx and 5xx carry no detail: AIVAX shows the model
// only 2xx bodies.
var responses = map[core.Kind]response{
	core.KindCreated: {http.StatusOK, "created", func(o core.Outcome) any {
		return struct {
			Status       string `json:"status"`
			TicketID     string `json:"ticket_id"`
			Deduplicated bool   `json:"deduplicated"`
		}{"created", o.TicketID, false}
	}},
	core.KindDuplicate: {http.StatusOK, "deduplicated", func(o core.Outcome) any { return replay(o.Result) }},
	core.KindFound: {http.StatusOK, "found", func(o core.Outcome) any {
		return struct {
			Status string           `json:"status"`
			Ticket *core.TicketView `json:"ticket"`
		}{"found", o.Ticket}
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

func retryable(status string) func(core.Outcome) any {
	return func(o core.Outcome) any {
		return struct {
			Status    string `json:"status"`
			Retryable bool   `json:"retryable"`
			Message   string `json:"message"`
		}{status, true, o.Message}
	}
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func rejection(o core.Outcome) any {
	return struct {
		Status string    `json:"status"`
		Error  errorBody `json:"error"`
	}{"rejected", errorBody{o.Code, o.Message}}
}

// short is the body of an error the model never sees: a fixed word.
func short(code string) func(core.Outcome) any {
	body := []byte(`{"error":"` + code + `"}`)
	return func(core.Outcome) any { return json.RawMessage(body) }
}

// replay is the stored result plus "deduplicated": true.
func replay(stored []byte) any {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(stored, &m); err != nil {
		// The service has already read this result; this cannot happen
		// unless the store changed it under us.
		return json.RawMessage(`{"error":"internal"}`)
	}
	m["deduplicated"] = json.RawMessage("true")
	return m
}

// write sends the response for o and returns the table row it used.
func write(w http.ResponseWriter, o core.Outcome) response {
	return writeRow(w, lookup(o.Kind), o)
}

func writeRow(w http.ResponseWriter, r response, o core.Outcome) response {
	b, err := json.Marshal(r.body(o))
	if err != nil {
		r = responses[core.KindInternal]
		b, _ = json.Marshal(r.body(o))
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(r.status)
	_, _ = w.Write(append(b, '\n'))
	return r
}
