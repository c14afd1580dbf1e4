package doors_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
)

// TestFollowUpsThroughBothDoors: add_comment and close_ticket over SQLite,
// each call made through one door and its repeat through the other: one
// comment, one close, the same answers (deduplicated on the repeat), the
// conflict (403 at the callback, a tool error over MCP), the mismatch,
// ticket_not_found for another tenant, ticket_closed and already_closed,
// and get_ticket through either door showing each write at once.
func TestFollowUpsThroughBothDoors(t *testing.T) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "tickets.sqlite"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	d := newBothDoors(t, store, nil, idem.PolicyRequest, false)
	decode := func(body string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return m
	}
	status, body := d.callback("user-a", core.CreateTicket, `{"title":"Cannot sign in"}`, "r-1")
	ticket, _ := decode(body)["ticket_id"].(string)
	if status != http.StatusOK || ticket == "" {
		t.Fatalf("create_ticket: %d %s", status, body)
	}
	comment := `{"ticket_id":"` + ticket + `","body":"It fails on my phone too."}`

	status, body = d.callback("user-a", core.AddComment, comment, "c-1")
	first := decode(body)
	if status != http.StatusOK || first["status"] != "created" || first["deduplicated"] != false || first["ticket_id"] != ticket {
		t.Fatalf("add_comment through the callback: %d %s", status, body)
	}
	res, text := d.mcp("user-a", core.AddComment, comment, "c-1")
	if again := decode(text); res.IsError || again["comment_id"] != first["comment_id"] || again["deduplicated"] != true {
		t.Fatalf("its repeat over MCP: %s (isError %v)", text, res.IsError)
	}
	if res, text = d.mcp("user-b", core.AddComment, comment, "c-1"); !res.IsError || !strings.Contains(text, `"request_id_conflict"`) {
		t.Fatalf("another user's repeat over MCP: %s (isError %v); want request_id_conflict", text, res.IsError)
	}
	if status, body = d.callback("user-b", core.AddComment, comment, "c-1"); status != http.StatusForbidden || !strings.Contains(body, `"request_id_conflict"`) {
		t.Fatalf("another user's repeat through the callback: %d %s; want 403 request_id_conflict", status, body)
	}
	if status, body = d.callback("user-a", core.AddComment, `{"ticket_id":"`+ticket+`","body":"Other words."}`, "c-1"); !strings.Contains(body, `"arguments_mismatch"`) {
		t.Fatalf("other words under the same request: %d %s; want arguments_mismatch", status, body)
	}
	for _, call := range []func() (bool, string){
		func() (bool, string) {
			s, b := d.callback("user-c", core.AddComment, comment, "c-2")
			return s == 200, b
		},
		func() (bool, string) {
			r, b := d.mcp("user-c", core.CloseTicket, `{"ticket_id":"`+ticket+`"}`, "x-9")
			return r.IsError, b
		},
	} {
		if ok, b := call(); !ok || !strings.Contains(b, `"ticket_not_found"`) {
			t.Fatalf("another tenant's follow-up: %s; want ticket_not_found", b)
		}
	}
	res, text = d.mcp("user-b", core.GetTicket, `{"ticket_id":"`+ticket+`"}`, "")
	var found core.Found
	if err := json.Unmarshal([]byte(text), &found); err != nil || res.IsError || len(found.Ticket.Comments) != 1 ||
		found.Ticket.Comments[0].CommentID != first["comment_id"] || found.Ticket.Status != core.StatusOpen {
		t.Fatalf("get_ticket over MCP after the comment: %s", text)
	}

	closeArgs := `{"ticket_id":"` + ticket + `","resolution":"Password reset."}`
	res, text = d.mcp("user-a", core.CloseTicket, closeArgs, "x-1")
	if want := `{"status":"closed","ticket_id":"` + ticket + `","deduplicated":false}`; res.IsError || text != want {
		t.Fatalf("close_ticket over MCP: %s (isError %v); want %s", text, res.IsError, want)
	}
	if status, body = d.callback("user-a", core.CloseTicket, closeArgs, "x-1"); status != http.StatusOK ||
		body != `{"status":"closed","ticket_id":"`+ticket+`","deduplicated":true}`+"\n" {
		t.Fatalf("its repeat through the callback: %d %s", status, body)
	}
	if status, body = d.callback("user-b", core.CloseTicket, `{"ticket_id":"`+ticket+`"}`, "x-2"); status != http.StatusOK ||
		body != `{"status":"closed","ticket_id":"`+ticket+`","already_closed":true,"deduplicated":false}`+"\n" {
		t.Fatalf("a second close: %d %s; want already_closed", status, body)
	}
	if res, text = d.mcp("user-a", core.AddComment, `{"ticket_id":"`+ticket+`","body":"After."}`, "c-3"); !res.IsError || !strings.Contains(text, `"ticket_closed"`) {
		t.Fatalf("a comment after the close: %s; want ticket_closed", text)
	}
	status, body = d.callback("user-a", core.GetTicket, `{"ticket_id":"`+ticket+`"}`, "g-1")
	if err := json.Unmarshal([]byte(body), &found); err != nil || status != http.StatusOK || found.Ticket.Status != core.StatusClosed ||
		found.Ticket.Resolution == nil || *found.Ticket.Resolution != "Password reset." || len(found.Ticket.Comments) != 1 {
		t.Fatalf("get_ticket through the callback after the close: %d %s", status, body)
	}
}
