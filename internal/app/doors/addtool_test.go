package doors_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/app/doors"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/jwtauth"
	"github.com/aivax-examples/idempotent-callback/internal/mcpdoor"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
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

const addToolHookKey = "add-tool-hook-key"

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
	auth, err := nonce.New(addToolHookKey, nonce.MinCost, nonce.CapCost)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	m := config.MCP{Issuer: "http://127.0.0.1:1", Audience: base + mcpdoor.Path, UserClaim: "sub",
		DevKey: filepath.Join(t.TempDir(), "dev-key.pem")}
	h, err := doors.Build(doors.Config{
		Deliver:  true, // a webhook is configured: each note's effect is delivered
		Store:    store,
		Users:    memstore.Users{"user-a": {ExternalID: "user-a", TenantID: "tenant-a", UserID: "alice"}},
		Common:   config.Common{Policy: string(idem.PolicyRequest), Retention: time.Hour},
		MCP:      m,
		MCPNames: config.MCPFileNames,
		Auth:     auth,
		Tools:    tools,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)

	// The AIVAX door: each request with a fresh nonce of the hook key.
	aivax := func(method, path, body string) (int, string) {
		t.Helper()
		n, err := nonce.Generate(addToolHookKey, nonce.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		code, b := callbacktest.Send(t, method, base+path, n, body)
		return code, string(b)
	}
	callback := func(text, requestID string) (int, string) {
		return aivax(http.MethodPost, "/callback", `{"type":"tool_call","function":{"name":"create_note","content":{"text":`+
			callbacktest.Quote(text)+`}},"context":{"externalUserId":"user-a","metadata":{"request_id":"`+requestID+`"}}}`)
	}

	// The MCP door: the Go SDK's client with a token of the development
	// issuer the door trusts.
	dev, err := jwtauth.LoadDevIssuer(m.DevKey, m.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	token, err := dev.Token("sub", "user-a", m.Audience, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "add-tool-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: m.Audience,
		HTTPClient: &http.Client{Transport: bearer{token}}, DisableStandaloneSSE: true, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: mcpdoor.Revisions[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	callMCP := func(text, requestID string) (*mcp.CallToolResult, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_note", Arguments: map[string]any{"text": text},
			Meta: mcp.Meta{mcpdoor.RequestIDMeta: requestID}})
		if err != nil {
			t.Fatalf("tools/call create_note: %v", err)
		}
		text0, ok := res.Content[0].(*mcp.TextContent)
		if len(res.Content) != 1 || !ok {
			t.Fatalf("content %v; want one text item", res.Content)
		}
		return res, text0.Text
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
