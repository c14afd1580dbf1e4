package core_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

func names(fns []core.Function) []string {
	out := make([]string, len(fns))
	for i := range fns {
		out[i] = fns[i].Name
	}
	return out
}

// TestAddedReadToolIsDispatched: a tool added to a Tools (coretest.Peek)
// is listed in name order with its schemas, validated from its fields,
// named by the unknown-function message and dispatched to its own read;
// the product's tools answer as before beside it.
func TestAddedReadToolIsDispatched(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	f.svc.Tools = coretest.Tools()
	if got, want := names(f.svc.Functions()), []string{core.AddComment, core.CloseTicket, core.CreateTicket, core.GetTicket, coretest.PeekTicket}; !slices.Equal(got, want) {
		t.Fatalf("tools %v; want %v", got, want)
	}
	if got := names(core.Functions()); !slices.Equal(got, []string{core.AddComment, core.CloseTicket, core.CreateTicket, core.GetTicket}) {
		t.Fatalf("the product's tools %v changed by another set", got)
	}
	peek, ok := f.svc.Lookup(coretest.PeekTicket)
	if !ok || peek.Hints() != (core.Hints{ReadOnly: true}) || !slices.Equal(peek.Statuses(), []string{"found", "busy", "rejected"}) {
		t.Fatalf("peek_ticket %v %+v %v; want read-only, found/busy/rejected", ok, peek.Hints(), peek.Statuses())
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(peek.Schema(), &schema); err != nil || !slices.Equal(schema.Required, []string{"ticket_id"}) {
		t.Fatalf("peek_ticket schema %s (%v); want ticket_id required", peek.Schema(), err)
	}

	created := f.handle(t, create("user-a", "r-1", okArgs))
	if created.Kind != core.KindCreated {
		t.Fatalf("create_ticket beside peek_ticket: %v %s", created.Kind, created.Message)
	}
	o := f.handle(t, body(coretest.PeekTicket, `{"ticket_id":"`+coretest.TicketID(created)+`"}`, ctx("user-b", "")))
	if tk := coretest.FoundTicket(o); o.Kind != core.KindFound || tk == nil || tk.Title != coretest.PeekedTitle+"Cannot sign in" || o.Function != coretest.PeekTicket {
		t.Fatalf("peek_ticket: %v %s %s; want found with the peeked title", o.Kind, o.Body, o.Message)
	}
	if o := f.handle(t, body(coretest.PeekTicket, `{"ticket_id":"`+coretest.TicketID(created)+`"}`, ctx("user-c", ""))); o.Code != core.CodeTicketNotFound {
		t.Fatalf("peek_ticket from another tenant: %v %q; want ticket_not_found", o.Kind, o.Code)
	}
	o = f.handle(t, body(coretest.PeekTicket, `{"id":"x"}`, ctx("user-a", "")))
	if o.Code != core.CodeInvalidArguments || !strings.Contains(o.Message, "peek_ticket takes no argument named \"id\"") {
		t.Fatalf("peek_ticket with a wrong field: %q %s; want invalid_arguments from its fields", o.Code, o.Message)
	}
	o = f.handle(t, body("reopen_ticket", `{}`, ctx("user-a", "")))
	if !strings.Contains(o.Message, "call add_comment, close_ticket, create_ticket, get_ticket or peek_ticket instead.") {
		t.Fatalf("unknown function with three tools: %s", o.Message)
	}
	o = newFixture(idem.PolicyArguments).handle(t, body("reopen_ticket", `{}`, ctx("user-a", "")))
	if !strings.Contains(o.Message, "call add_comment, close_ticket, create_ticket or get_ticket instead.") {
		t.Fatalf("unknown function with the product's tools: %s", o.Message)
	}
	if ops, tickets := f.store.Count(); ops != 1 || tickets != 1 {
		t.Fatalf("store holds %d operations, %d tickets; want the one create", ops, tickets)
	}
}

// TestAddedWriteToolClaimsItsKey: a tool that writes gets the request_id
// check, one key per request (the request policy), the replay of its stored answer on a repeat,
// its own messages for a pending key and other arguments, and an internal
// outcome for a stored answer it cannot read; only the first call writes.
func TestAddedWriteToolClaimsItsKey(t *testing.T) {
	note := coretest.Note()
	tools, err := core.NewTools(note)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(idem.PolicyRequest)
	f.svc.Tools = tools
	fn, _ := f.svc.Lookup(coretest.CreateNote)
	if fn.Hints() != (core.Hints{Idempotent: true}) || !slices.Equal(fn.Statuses(), []string{"created", "in_progress", "busy", "rejected"}) {
		t.Fatalf("create_note hints %+v statuses %v; want idempotent, created/in_progress/busy/rejected", fn.Hints(), fn.Statuses())
	}
	call := func(requestID, text string) core.Outcome {
		return f.handle(t, body(coretest.CreateNote, `{"text":`+q(text)+`}`, ctx("user-a", requestID)))
	}
	if o := call("", "hello"); o.Code != core.CodeMissingRequestID {
		t.Fatalf("without request_id: %v %q; want missing_request_id", o.Kind, o.Code)
	}
	first := call("r-1", "hello")
	again := call("r-1", "hello")
	if first.Kind != core.KindCreated || again.Kind != core.KindDuplicate ||
		string(first.Body) != `{"status":"created","note_id":"ticket-1","deduplicated":false}` ||
		string(again.Body) != `{"status":"created","note_id":"ticket-1","deduplicated":true}` ||
		again.Key == "" || again.Key != first.Key {
		t.Fatalf("first %v %s, repeat %v %s; want created, then the same answer deduplicated under one key",
			first.Kind, first.Body, again.Kind, again.Body)
	}
	if o := call("r-1", "other"); o.Code != core.CodeArgumentsMismatch || o.Message != note.Write.Mismatch {
		t.Fatalf("other arguments: %q %q; want arguments_mismatch with the tool's message", o.Code, o.Message)
	}
	keyOf := func(requestID, args string) (string, string) {
		return idem.Key(idem.PolicyRequest, "tenant-a", requestID, coretest.CreateNote, args)
	}
	key, fp := keyOf("r-2", `{"text":"pending"}`)
	f.store.Put(idem.Record{Key: key, State: idem.StatePending, Tenant: "tenant-a", Owner: "alice",
		Function: coretest.CreateNote, Fingerprint: fp, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	if o := call("r-2", "pending"); o.Kind != core.KindInProgress || o.Message != note.Write.InProgress {
		t.Fatalf("pending key: %v %q; want in_progress with the tool's message", o.Kind, o.Message)
	}
	key, fp = keyOf("r-3", `{"text":"broken"}`)
	f.store.Put(idem.Record{Key: key, State: idem.StateCompleted, Tenant: "tenant-a", Owner: "alice",
		Function: coretest.CreateNote, Fingerprint: fp, Result: []byte(`{}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	if o := call("r-3", "broken"); o.Kind != core.KindInternal || o.Err == nil {
		t.Fatalf("unreadable stored answer: %v %v; want internal", o.Kind, o.Err)
	}
	if ops, items := f.store.Count(); ops != 3 || items != 1 {
		t.Fatalf("store holds %d operations, %d items; want the first call's and the two put, one item", ops, items)
	}
	if items, err := f.store.Items(context.Background(), []string{coretest.NoteKey("ticket-1")}); err != nil || len(items) != 1 ||
		items[0].Attrs.Str("text") != "hello" || items[0].Delivery != nil {
		t.Fatalf("note ticket-1: %+v, %v; want the first call's text, no delivery (none configured)", items, err)
	}
}

// TestNewToolsRefusesBadDefinitions: a definition the registry cannot
// serve is an error naming it when the set is built.
func TestNewToolsRefusesBadDefinitions(t *testing.T) {
	peek := coretest.Peek()
	write := coretest.Note()
	for _, tc := range []struct {
		name string
		fns  []core.Function
		want string
	}{
		{"no name", []core.Function{{Read: peek.Read, Answer: peek.Answer}}, "needs a name"},
		{"twice", []core.Function{peek, peek}, "peek_ticket: defined twice"},
		{"neither read nor write", []core.Function{{Name: "x", Answer: peek.Answer}}, "x: set exactly one"},
		{"read and write", []core.Function{{Name: "x", Read: peek.Read, Write: write.Write, Answer: peek.Answer}}, "x: set exactly one"},
		{"write without answer", []core.Function{{Name: "x", Write: &core.Write{Plan: write.Write.Plan}, Answer: peek.Answer, Busy: "b"}}, "x: a Write needs"},
		{"no busy message", []core.Function{{Name: "x", Read: peek.Read, Answer: peek.Answer}}, "x: a tool needs its Busy message"},
		{"no answer", []core.Function{{Name: "x", Read: peek.Read, Busy: "b"}}, "x: output schema"},
		{"field without schema", []core.Function{{Name: "x", Read: peek.Read, Answer: peek.Answer, Busy: "b",
			Fields: []core.Field{{Name: "code", Trim: true, MaxLen: 5}}}}, "field code"},
	} {
		if _, err := core.NewTools(tc.fns...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
}
