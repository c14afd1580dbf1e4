package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

// TestAddedToolReachesTheDoor: a tool added to the service's tools
// (coretest.Peek) is in GET /functions with its schema, and POST
// /callback dispatches it, with no change to the handler.
func TestAddedToolReachesTheDoor(t *testing.T) {
	n := testNonce(t)
	e := newEnv(t, testVerifier(t))
	e.h.Service.Tools = coretest.Tools()

	r := httptest.NewRequest(http.MethodGet, "http://tickets.example.org/functions", nil)
	r.Header.Set(httpapi.NonceHeader, n)
	w := e.serve(r)
	var cat struct {
		Functions []struct {
			Name          string          `json:"name"`
			ContentFormat json.RawMessage `json:"contentFormat"`
		} `json:"functions"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &cat); err != nil || w.Code != 200 {
		t.Fatalf("GET /functions: %d %s (%v)", w.Code, w.Body, err)
	}
	var got []string
	for _, f := range cat.Functions {
		got = append(got, f.Name)
	}
	if want := []string{core.AddComment, core.CloseTicket, core.CreateTicket, core.GetTicket, coretest.PeekTicket}; !slices.Equal(got, want) {
		t.Fatalf("catalogue lists %v; want %v", got, want)
	}
	peek, _ := e.h.Service.Lookup(coretest.PeekTicket)
	if !callbacktest.SameJSON(cat.Functions[4].ContentFormat, peek.Schema()) {
		t.Fatalf("peek_ticket contentFormat %s; want %s", cat.Functions[4].ContentFormat, peek.Schema())
	}

	if w := e.post(createBody("user-a", "r-1", "Cannot sign in"), n); w.Code != 200 {
		t.Fatalf("create_ticket beside peek_ticket: %d %s", w.Code, w.Body)
	}
	w = e.post(callBody(coretest.PeekTicket, "user-a", "", `{"ticket_id":"ticket-1"}`), n)
	var b struct {
		Status string `json:"status"`
		Ticket struct {
			Title string `json:"title"`
		} `json:"ticket"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || w.Code != 200 || b.Status != "found" ||
		b.Ticket.Title != coretest.PeekedTitle+"Cannot sign in" {
		t.Fatalf("POST /callback peek_ticket: %d %s; want found with the peeked title", w.Code, w.Body)
	}
}
