package doors_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

// busyStore answers every claim busy while busy is set, writing nothing,
// as a throttled or timed-out store does.
type busyStore struct {
	core.Store
	busy atomic.Bool
}

func (s *busyStore) Claims() idem.Store[core.Writes] {
	return core.ClaimFunc(func(ctx context.Context, rec idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
		if s.busy.Load() {
			return nil, core.ErrBusy
		}
		return s.Store.Claims().Claim(ctx, rec, w, now)
	})
}

// TestWriteToolInOneFile: create_note, registered on the service that
// doors.Build composes, is listed by GET /functions and MCP tools/list
// (schemas and annotations from its definition) and answered by both
// doors: a call through one door creates, its repeat through the other
// replays the stored answer (deduplicated: true), other text on the same
// request gets its mismatch message, a busy store its busy message
// through both doors (nothing written), and after the store recovers
// the same request creates. The doors hold no line about it. Its items
// are a kind no store names and its effects a kind no destination names:
// each note reaches the webhook once, as a "note.created" event.
func TestWriteToolInOneFile(t *testing.T) {
	tools, err := core.NewTools(append(core.Functions(), coretest.Note())...)
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := tools.Lookup("create_note")
	mem := memtest.New()
	store := &busyStore{Store: mem}
	d := newBothDoors(t, store, tools, idem.PolicyRequest, true) // a webhook is configured: each note's effect is delivered
	ctx := context.Background()
	aivax := d.aivax
	callback := func(text, requestID string) (int, string) {
		return d.callback("user-a", "create_note", `{"text":`+callbacktest.Quote(text)+`}`, requestID)
	}
	cs := d.session("user-a")
	callMCP := func(text, requestID string) (*mcp.CallToolResult, string) {
		t.Helper()
		return d.mcp("user-a", "create_note", `{"text":`+callbacktest.Quote(text)+`}`, requestID)
	}

	// Listed by both catalogues, from its definition.
	status, body := aivax(http.MethodGet, "/functions", "")
	var cat struct {
		Functions []struct {
			Name          string          `json:"name"`
			ContentFormat json.RawMessage `json:"contentFormat"`
		} `json:"functions"`
	}
	if err := json.Unmarshal([]byte(body), &cat); status != http.StatusOK || err != nil || len(cat.Functions) != 5 ||
		cat.Functions[2].Name != "create_note" || !callbacktest.SameJSON(cat.Functions[2].ContentFormat, fn.Schema()) {
		t.Fatalf("GET /functions: %d %s; want create_note third (name order) with its schema", status, body)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed *mcp.Tool
	for _, tool := range list.Tools {
		if tool.Name == "create_note" {
			listed = tool
		}
	}
	if listed == nil || len(list.Tools) != 5 {
		t.Fatalf("tools/list: %d tools, create_note %v; want it among the product's four", len(list.Tools), listed)
	}
	in, _ := json.Marshal(listed.InputSchema)
	out, _ := json.Marshal(listed.OutputSchema)
	a := listed.Annotations
	if !callbacktest.SameJSON(in, fn.Schema()) || !callbacktest.SameJSON(out, fn.OutputSchema()) || listed.Description != fn.Description ||
		a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint || !a.IdempotentHint {
		t.Fatalf("tools/list create_note: input %s output %s annotations %+v", in, out, a)
	}

	// The callback creates; MCP's repeat replays the stored answer.
	answer := func(id string, repeat bool) string {
		return string(mustJSON(t, coretest.NoteAnswer{Status: "created", NoteID: id, Deduplicated: repeat}))
	}
	status, body = callback("Call the printer vendor", "r-1")
	var first coretest.NoteAnswer
	if err := json.Unmarshal([]byte(body), &first); err != nil || status != http.StatusOK || first.NoteID == "" ||
		body != answer(first.NoteID, false)+"\n" {
		t.Fatalf("callback create_note: %d %s; want 200 created with a note_id", status, body)
	}
	res, text := callMCP("Call the printer vendor", "r-1")
	if want := answer(first.NoteID, true); text != want || res.IsError || !callbacktest.SameJSON(mustJSON(t, res.StructuredContent), []byte(want)) {
		t.Fatalf("MCP repeat: %s (isError %v); want %s", text, res.IsError, want)
	}
	// MCP creates; the callback's repeat replays it.
	res, text = callMCP("Order toner", "r-2")
	var second coretest.NoteAnswer
	if err := json.Unmarshal([]byte(text), &second); err != nil || res.IsError || second.NoteID == first.NoteID ||
		text != answer(second.NoteID, false) {
		t.Fatalf("MCP create_note: %s (isError %v); want a second note created", text, res.IsError)
	}
	if status, body = callback("Order toner", "r-2"); status != http.StatusOK || body != answer(second.NoteID, true)+"\n" {
		t.Fatalf("callback repeat: %d %s; want %s", status, body, answer(second.NoteID, true))
	}
	// The same request with other text (the request policy): the tool's
	// own mismatch message.
	if status, body = callback("Order paper", "r-2"); !strings.Contains(body, `"arguments_mismatch"`) ||
		!strings.Contains(body, "This request already saved another note") {
		t.Fatalf("other text, same request: %d %s; want arguments_mismatch with create_note's message", status, body)
	}

	// A busy store: each door answers with the tool's busy message, and
	// nothing is written; once it recovers, the same request creates.
	store.busy.Store(true)
	wantBusy := `{"status":"busy","retryable":true,"message":"` + coretest.NoteBusy + `"}`
	if status, body = callback("Water the plants", "r-3"); status != http.StatusOK || body != wantBusy+"\n" {
		t.Fatalf("callback, store busy: %d %s; want %s", status, body, wantBusy)
	}
	if res, text = callMCP("Water the plants", "r-3"); text != wantBusy || !res.IsError {
		t.Fatalf("MCP, store busy: %s (isError %v); want %s as an error result", text, res.IsError, wantBusy)
	}
	store.busy.Store(false)
	res, text = callMCP("Water the plants", "r-3")
	var third coretest.NoteAnswer
	if err := json.Unmarshal([]byte(text), &third); err != nil || res.IsError || text != answer(third.NoteID, false) ||
		third.NoteID == first.NoteID || third.NoteID == second.NoteID {
		t.Fatalf("MCP after the store recovered: %s; want a third note created", text)
	}

	// One item per created note, holding its text; repeats, the mismatch
	// and the busy calls wrote nothing.
	if ops, items := mem.Count(); ops != 3 || items != 3 {
		t.Errorf("store holds %d operations, %d items; want 3 and 3", ops, items)
	}
	for id, text := range map[string]string{first.NoteID: "Call the printer vendor", second.NoteID: "Order toner", third.NoteID: "Water the plants"} {
		items, err := store.Items(ctx, []string{coretest.NoteKey(id)})
		if err != nil || len(items) != 1 || items[0].Attrs.Str("text") != text {
			t.Errorf("%s: %+v, %v; want the note %q", id, items, err, text)
		}
	}

	// Each note's effect, of a kind no destination names, reaches the
	// webhook once as the tool made it ("note.created"), under its own
	// delivery key, through the engine no line of which knows notes.
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	hook, err := webhook.New(webhook.Config{URL: fake.WebhookURL(), Secret: fake.Config().Secret, Lookup: true, Now: fake.Now})
	if err != nil {
		t.Fatal(err)
	}
	eng := &delivery.Engine{Store: mem, Destination: hook}
	deliverytest.SweepAll(ctx, eng, 2, 10)
	for _, note := range []coretest.NoteAnswer{first, second, third} {
		r, err := mem.Delivery(ctx, coretest.NoteKey(note.NoteID))
		if err != nil || r.State != delivery.StateDelivered || r.Kind != coretest.NoteKind || fake.Held(note.NoteID) != 1 {
			t.Errorf("note %s: %+v, %v, held %d; want delivered once", note.NoteID, r, err, fake.Held(note.NoteID))
		}
	}
	var events []coretest.NoteEvent
	for _, rec := range fake.Received() {
		var ev coretest.NoteEvent
		if rec.Kind == fakehelpdesk.WebhookCreate && json.Unmarshal(rec.Body, &ev) == nil {
			if ev.Type != "note.created" || rec.Header.Get("Idempotency-Key") != ev.NoteID || rec.Header.Get("webhook-id") != ev.NoteID {
				t.Errorf("webhook received %s under key %q", rec.Body, rec.Header.Get("Idempotency-Key"))
			}
			events = append(events, ev)
		}
	}
	if len(events) != 3 {
		t.Fatalf("webhook received %d note events; want 3", len(events))
	}
}

// bearer sends the access token on every request of the MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
