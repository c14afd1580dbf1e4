package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/core/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
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
	f := newFixture(opkey.PolicyArguments)
	f.svc.Tools = coretest.Tools()
	if got, want := names(f.svc.Functions()), []string{core.CreateTicket, core.GetTicket, coretest.PeekTicket}; !slices.Equal(got, want) {
		t.Fatalf("tools %v; want %v", got, want)
	}
	if got := names(core.Functions()); !slices.Equal(got, []string{core.CreateTicket, core.GetTicket}) {
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
	o := f.handle(t, body(coretest.PeekTicket, `{"ticket_id":"`+created.TicketID()+`"}`, ctx("user-b", "")))
	if o.Kind != core.KindFound || o.Ticket.Title != coretest.Peeked+"Cannot sign in" || o.Function != coretest.PeekTicket {
		t.Fatalf("peek_ticket: %v %+v %s; want found with the peeked title", o.Kind, o.Ticket, o.Message)
	}
	if o := f.handle(t, body(coretest.PeekTicket, `{"ticket_id":"`+created.TicketID()+`"}`, ctx("user-c", ""))); o.Code != core.CodeTicketNotFound {
		t.Fatalf("peek_ticket from another tenant: %v %q; want ticket_not_found", o.Kind, o.Code)
	}
	o = f.handle(t, body(coretest.PeekTicket, `{"id":"x"}`, ctx("user-a", "")))
	if o.Code != core.CodeInvalidArguments || !strings.Contains(o.Message, "peek_ticket takes no argument named \"id\"") {
		t.Fatalf("peek_ticket with a wrong field: %q %s; want invalid_arguments from its fields", o.Code, o.Message)
	}
	o = f.handle(t, body("close_ticket", `{}`, ctx("user-a", "")))
	if !strings.Contains(o.Message, "call create_ticket, get_ticket or peek_ticket instead.") {
		t.Fatalf("unknown function with three tools: %s", o.Message)
	}
	o = newFixture(opkey.PolicyArguments).handle(t, body("close_ticket", `{}`, ctx("user-a", "")))
	if !strings.Contains(o.Message, "call create_ticket or get_ticket instead.") {
		t.Fatalf("unknown function with the product's tools: %s", o.Message)
	}
	if ops, tickets := f.store.Count(); ops != 1 || tickets != 1 {
		t.Fatalf("store holds %d operations, %d tickets; want the one create", ops, tickets)
	}
}

// notes is a test-only tool that writes: its items live in a map, claimed
// with the operation under one lock, the way a store's transaction does.
type notes struct {
	mu    sync.Mutex
	ops   map[string]core.Operation
	items map[string]string
}

func (n *notes) tool() core.Function {
	return core.Function{
		Name: "add_note", Description: "Add a note (a tool of the tests).",
		Fields: []core.Field{{Name: "text", Description: "The note.", Required: true, MaxLen: 50}},
		Answer: core.Answer{Kind: core.KindCreated, Members: map[string]any{"ticket_id": map[string]any{"type": "string"}},
			Required: []string{"ticket_id"}},
		Write: &core.Write{
			Commit: func(_ context.Context, _ *core.Service, r core.Request, op core.Operation) (core.Outcome, *core.Operation, error) {
				n.mu.Lock()
				defer n.mu.Unlock()
				if e, ok := n.ops[op.Key]; ok && e.Live(r.Now) {
					return core.Outcome{}, &e, nil
				}
				res := core.Result{Status: "created", TicketID: fmt.Sprintf("note-%d", len(n.items)+1)}
				op.Result, _ = json.Marshal(res)
				n.ops[op.Key], n.items[res.TicketID] = op, r.Args["text"]
				return core.Outcome{Kind: core.KindCreated, Result: &res}, nil, nil
			},
			Replay: func(stored []byte) (core.Outcome, bool) {
				var r core.Result
				if json.Unmarshal(stored, &r) != nil || r.TicketID == "" {
					return core.Outcome{}, false
				}
				r.Deduplicated = true
				return core.Outcome{Kind: core.KindDuplicate, Result: &r}, true
			},
			InProgress: "The note is still being added.",
			Mismatch:   "This request added another note.",
		},
	}
}

// TestAddedWriteToolClaimsItsKey: a tool that writes gets the request_id
// check, one key per request (the request policy), the replay of its stored answer on a repeat,
// its own messages for a pending key and other arguments, and an internal
// outcome for a stored answer it cannot read; only the first call writes.
func TestAddedWriteToolClaimsItsKey(t *testing.T) {
	n := &notes{ops: map[string]core.Operation{}, items: map[string]string{}}
	tools, err := core.NewTools(n.tool())
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(opkey.PolicyRequest)
	f.svc.Tools = tools
	fn, _ := f.svc.Lookup("add_note")
	if fn.Hints() != (core.Hints{Idempotent: true}) || !slices.Equal(fn.Statuses(), []string{"created", "in_progress", "busy", "rejected"}) {
		t.Fatalf("add_note hints %+v statuses %v; want idempotent, created/in_progress/busy/rejected", fn.Hints(), fn.Statuses())
	}
	note := func(requestID, text string) core.Outcome {
		return f.handle(t, body("add_note", `{"text":`+q(text)+`}`, ctx("user-a", requestID)))
	}
	if o := note("", "hello"); o.Code != core.CodeMissingRequestID {
		t.Fatalf("without request_id: %v %q; want missing_request_id", o.Kind, o.Code)
	}
	first := note("r-1", "hello")
	again := note("r-1", "hello")
	if first.Kind != core.KindCreated || again.Kind != core.KindDuplicate || again.TicketID() != first.TicketID() ||
		!again.Result.Deduplicated || again.Key == "" || again.Key != first.Key {
		t.Fatalf("first %v %q, repeat %v %q; want created, then the same answer deduplicated under one key",
			first.Kind, first.TicketID(), again.Kind, again.TicketID())
	}
	if o := note("r-1", "other"); o.Code != core.CodeArgumentsMismatch || o.Message != "This request added another note." {
		t.Fatalf("other arguments: %q %q; want arguments_mismatch with the tool's message", o.Code, o.Message)
	}
	keyOf := func(requestID, args string) (string, string) {
		return opkey.Key(opkey.PolicyRequest, "tenant-a", requestID, "add_note", args)
	}
	key, fp := keyOf("r-2", `{"text":"pending"}`)
	n.ops[key] = core.Operation{Key: key, State: core.StatePending, TenantID: "tenant-a", UserID: "alice",
		Function: "add_note", Fingerprint: fp, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if o := note("r-2", "pending"); o.Kind != core.KindInProgress || o.Message != "The note is still being added." {
		t.Fatalf("pending key: %v %q; want in_progress with the tool's message", o.Kind, o.Message)
	}
	key, fp = keyOf("r-3", `{"text":"broken"}`)
	n.ops[key] = core.Operation{Key: key, State: core.StateCompleted, TenantID: "tenant-a", UserID: "alice",
		Function: "add_note", Fingerprint: fp, Result: []byte(`{}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if o := note("r-3", "broken"); o.Kind != core.KindInternal || o.Err == nil {
		t.Fatalf("unreadable stored answer: %v %v; want internal", o.Kind, o.Err)
	}
	if len(n.items) != 1 || n.items["note-1"] != "hello" {
		t.Fatalf("notes %v; want the first call's only", n.items)
	}
}

// TestNewToolsRefusesBadDefinitions: a definition the registry cannot
// serve is an error naming it when the set is built.
func TestNewToolsRefusesBadDefinitions(t *testing.T) {
	peek := coretest.Peek()
	write := (&notes{}).tool()
	for _, tc := range []struct {
		name string
		fns  []core.Function
		want string
	}{
		{"no name", []core.Function{{Read: peek.Read, Answer: peek.Answer}}, "needs a name"},
		{"twice", []core.Function{peek, peek}, "peek_ticket: defined twice"},
		{"neither read nor write", []core.Function{{Name: "x", Answer: peek.Answer}}, "x: set exactly one"},
		{"read and write", []core.Function{{Name: "x", Read: peek.Read, Write: write.Write, Answer: peek.Answer}}, "x: set exactly one"},
		{"write without replay", []core.Function{{Name: "x", Write: &core.Write{Commit: write.Write.Commit}, Answer: peek.Answer}}, "x: a Write needs"},
		{"no answer", []core.Function{{Name: "x", Read: peek.Read}}, "x: output schema"},
		{"field without schema", []core.Function{{Name: "x", Read: peek.Read, Answer: peek.Answer,
			Fields: []core.Field{{Name: "code", Trim: true, MaxLen: 5}}}}, "field code"},
	} {
		if _, err := core.NewTools(tc.fns...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
}
