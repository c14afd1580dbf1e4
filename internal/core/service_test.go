package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/memtest"
)

var now = time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)

var users = callbacktest.Users

type fixture struct {
	svc   *core.Service
	store *memtest.Store
}

func newFixture(policy idem.Policy) *fixture {
	st := memtest.New()
	var n atomic.Int64
	return &fixture{store: st, svc: &core.Service{
		Store: st, Users: users, Policy: policy, Retention: 24 * time.Hour,
		Now:   func() time.Time { return now },
		NewID: func() string { return fmt.Sprintf("ticket-%d", n.Add(1)) },
	}}
}

// newService is a service on a new in-memory store, returned beside it,
// for users: the arguments policy, an hour's retention and ticket-1 as
// every ticket's ID.
func newService(users core.Users) (*core.Service, *memtest.Store) {
	st := memtest.New()
	return &core.Service{Store: st, Users: users, Policy: idem.PolicyArguments,
		Retention: time.Hour, NewID: func() string { return "ticket-1" }}, st
}

// handle parses body as the HTTP layer does, then runs the service.
func (f *fixture) handle(t *testing.T, body string) core.Outcome {
	t.Helper()
	c, err := httpapi.ParseCall([]byte(body))
	if err != nil {
		t.Fatalf("ParseCall(%s): %v", clip(body), err)
	}
	return f.svc.Answer(context.Background(), c)
}

func (f *fixture) count() [2]int {
	ops, tickets := f.store.Count()
	return [2]int{ops, tickets}
}

// The callback builders, under the short names the tables use.
var (
	q      = callbacktest.Quote
	ctx    = callbacktest.Context
	body   = callbacktest.Body
	create = callbacktest.Create
)

const okArgs = `{"title":"Cannot sign in","description":"Since Monday.","priority":"high"}`

// TestHandleRejections runs one bad call per rule of docs/contract.md,
// Order of checks steps 4 to 7, and of its Functions. Each row names the
// bad input and the answer it gets; after every row the store holds
// exactly what it held before (one ticket written first, so "nothing
// written" is not "store empty").
func TestHandleRejections(t *testing.T) {
	long := func(n int, s string) string { return strings.Repeat(s, n) }
	title := func(v string) string { return `{"title":` + v + `}` }
	type row struct {
		name string
		body string
		kind core.Kind
		code string
	}
	rows := []row{
		// Step 4.
		{"unknown function", body("delete_ticket", okArgs, ctx("user-a", "r-1")), core.KindRejected, core.CodeUnknownFunction},
		{"unknown function before missing user", body("delete_ticket", okArgs, ""), core.KindRejected, core.CodeUnknownFunction},
		{"unknown function before unknown user", body("delete_ticket", okArgs, ctx("user-x", "r-1")), core.KindRejected, core.CodeUnknownFunction},
		{"function name empty", body("", okArgs, ctx("user-a", "r-1")), core.KindRejected, core.CodeUnknownFunction},
		{"function name differs in case", body("Create_Ticket", okArgs, ctx("user-a", "r-1")), core.KindRejected, core.CodeUnknownFunction},
		// Step 5.
		{"context missing", body(core.CreateTicket, okArgs, ""), core.KindRejected, core.CodeMissingExternalUserID},
		{"context null", body(core.CreateTicket, okArgs, "null"), core.KindRejected, core.CodeMissingExternalUserID},
		{"context empty object", body(core.CreateTicket, okArgs, "{}"), core.KindRejected, core.CodeMissingExternalUserID},
		{"externalUserId null", body(core.CreateTicket, okArgs, `{"externalUserId":null,"metadata":{"request_id":"r-1"}}`), core.KindRejected, core.CodeMissingExternalUserID},
		{"externalUserId empty", body(core.CreateTicket, okArgs, `{"externalUserId":"","metadata":{"request_id":"r-1"}}`), core.KindRejected, core.CodeMissingExternalUserID},
		{"externalUserId missing before request_id missing", body(core.CreateTicket, okArgs, `{"metadata":null}`), core.KindRejected, core.CodeMissingExternalUserID},
		{"externalUserId missing for get_ticket", body(core.GetTicket, `{"ticket_id":"ticket-1"}`, "{}"), core.KindRejected, core.CodeMissingExternalUserID},
		{"unknown user", create("user-x", "r-1", okArgs), core.KindForbidden, ""},
		{"unknown user differs only in case", create("User-A", "r-1", okArgs), core.KindForbidden, ""},
		{"disabled user", create("user-d", "r-1", okArgs), core.KindForbidden, ""},
		{"unknown user before missing request_id", body(core.CreateTicket, okArgs, `{"externalUserId":"user-x"}`), core.KindForbidden, ""},
		{"disabled user before invalid arguments", create("user-d", "r-1", `{"x":1}`), core.KindForbidden, ""},
		{"unknown user on get_ticket", body(core.GetTicket, `{"ticket_id":"ticket-1"}`, ctx("user-x", "")), core.KindForbidden, ""},
		{"disabled user on get_ticket", body(core.GetTicket, `{"ticket_id":"ticket-1"}`, ctx("user-d", "")), core.KindForbidden, ""},
		// Step 6.
		{"metadata missing", body(core.CreateTicket, okArgs, `{"externalUserId":"user-a"}`), core.KindRejected, core.CodeMissingRequestID},
		{"metadata null", body(core.CreateTicket, okArgs, `{"externalUserId":"user-a","metadata":null}`), core.KindRejected, core.CodeMissingRequestID},
		{"request_id missing", body(core.CreateTicket, okArgs, `{"externalUserId":"user-a","metadata":{"other":"x"}}`), core.KindRejected, core.CodeMissingRequestID},
		{"request_id null", body(core.CreateTicket, okArgs, `{"externalUserId":"user-a","metadata":{"request_id":null}}`), core.KindRejected, core.CodeMissingRequestID},
		{"request_id empty", create("user-a", "", okArgs), core.KindRejected, core.CodeMissingRequestID},
		{"request_id 129 chars", create("user-a", long(129, "r"), okArgs), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id 129 multibyte chars", create("user-a", long(129, "é"), okArgs), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id with newline", create("user-a", "r-1\n", okArgs), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id with NUL", create("user-a", "r\x00-1", okArgs), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id with DEL", create("user-a", "r-1\x7f", okArgs), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id with C1 control U+0085", create("user-a", "r-1\u0085", okArgs), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id with tab", create("user-a", "\tr-1", okArgs), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id number", body(core.CreateTicket, okArgs, `{"externalUserId":"user-a","metadata":{"request_id":123}}`), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id true", body(core.CreateTicket, okArgs, `{"externalUserId":"user-a","metadata":{"request_id":true}}`), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id object", body(core.CreateTicket, okArgs, `{"externalUserId":"user-a","metadata":{"request_id":{"id":"r-1"}}}`), core.KindRejected, core.CodeInvalidRequestID},
		{"request_id array", body(core.CreateTicket, okArgs, `{"externalUserId":"user-a","metadata":{"request_id":["r-1"]}}`), core.KindRejected, core.CodeInvalidRequestID},
		{"invalid request_id before invalid arguments", create("user-a", long(129, "r"), `{"x":1}`), core.KindRejected, core.CodeInvalidRequestID},
		{"missing request_id before invalid arguments", create("user-a", "", `{}`), core.KindRejected, core.CodeMissingRequestID},
		// Step 7, create_ticket (docs/contract.md, Functions).
		{"title missing", create("user-a", "r-1", `{"description":"d"}`), core.KindRejected, core.CodeInvalidArguments},
		{"arguments empty object", create("user-a", "r-1", `{}`), core.KindRejected, core.CodeInvalidArguments},
		{"title null", create("user-a", "r-1", title("null")), core.KindRejected, core.CodeInvalidArguments},
		{"title empty", create("user-a", "r-1", title(`""`)), core.KindRejected, core.CodeInvalidArguments},
		{"title spaces only", create("user-a", "r-1", title(`"    "`)), core.KindRejected, core.CodeInvalidArguments},
		{"title unicode spaces only", create("user-a", "r-1", title(`"\u00a0\u3000\u2003"`)), core.KindRejected, core.CodeInvalidArguments},
		{"title 201 chars", create("user-a", "r-1", title(q(long(201, "t")))), core.KindRejected, core.CodeInvalidArguments},
		{"title 201 multibyte chars", create("user-a", "r-1", title(q(long(201, "日")))), core.KindRejected, core.CodeInvalidArguments},
		{"title 201 chars inside spaces", create("user-a", "r-1", title(q("  "+long(201, "t")+"  "))), core.KindRejected, core.CodeInvalidArguments},
		{"title with newline", create("user-a", "r-1", title(`"a\nb"`)), core.KindRejected, core.CodeInvalidArguments},
		{"title with trailing newline", create("user-a", "r-1", title(`"title\n"`)), core.KindRejected, core.CodeInvalidArguments},
		{"title with tab", create("user-a", "r-1", title(`"a\tb"`)), core.KindRejected, core.CodeInvalidArguments},
		{"title with NUL", create("user-a", "r-1", title(`"a\u0000b"`)), core.KindRejected, core.CodeInvalidArguments},
		{"title with C1 control", create("user-a", "r-1", title(`"a\u0085b"`)), core.KindRejected, core.CodeInvalidArguments},
		{"title number", create("user-a", "r-1", title(`42`)), core.KindRejected, core.CodeInvalidArguments},
		{"title array", create("user-a", "r-1", title(`["a"]`)), core.KindRejected, core.CodeInvalidArguments},
		{"title object", create("user-a", "r-1", title(`{"a":"b"}`)), core.KindRejected, core.CodeInvalidArguments},
		{"title bool", create("user-a", "r-1", title(`true`)), core.KindRejected, core.CodeInvalidArguments},
		{"description 4001 chars", create("user-a", "r-1", `{"title":"t","description":`+q(long(4001, "d"))+`}`), core.KindRejected, core.CodeInvalidArguments},
		{"description 4001 multibyte chars", create("user-a", "r-1", `{"title":"t","description":`+q(long(4001, "é"))+`}`), core.KindRejected, core.CodeInvalidArguments},
		{"description number", create("user-a", "r-1", `{"title":"t","description":5}`), core.KindRejected, core.CodeInvalidArguments},
		{"priority unknown", create("user-a", "r-1", `{"title":"t","priority":"critical"}`), core.KindRejected, core.CodeInvalidArguments},
		{"priority upper case", create("user-a", "r-1", `{"title":"t","priority":"HIGH"}`), core.KindRejected, core.CodeInvalidArguments},
		{"priority empty", create("user-a", "r-1", `{"title":"t","priority":""}`), core.KindRejected, core.CodeInvalidArguments},
		{"priority padded", create("user-a", "r-1", `{"title":"t","priority":" high"}`), core.KindRejected, core.CodeInvalidArguments},
		{"priority number", create("user-a", "r-1", `{"title":"t","priority":1}`), core.KindRejected, core.CodeInvalidArguments},
		{"extra member", create("user-a", "r-1", `{"title":"t","assignee":"bob"}`), core.KindRejected, core.CodeInvalidArguments},
		{"extra member null", create("user-a", "r-1", `{"title":"t","assignee":null}`), core.KindRejected, core.CodeInvalidArguments},
		{"member name differs in case", create("user-a", "r-1", `{"Title":"t"}`), core.KindRejected, core.CodeInvalidArguments},
		// Step 7, the limits of the operation key (depth, duplicate members,
		// lone surrogates) the field rules do not see.
		{"duplicate member", create("user-a", "r-1", `{"title":"a","title":"b"}`), core.KindRejected, core.CodeInvalidArguments},
		{"lone surrogate in description", create("user-a", "r-1", `{"title":"t","description":"\ud800"}`), core.KindRejected, core.CodeInvalidArguments},
		// Step 7, get_ticket.
		{"get_ticket without ticket_id", body(core.GetTicket, `{}`, ctx("user-a", "")), core.KindRejected, core.CodeInvalidArguments},
		{"get_ticket ticket_id empty", body(core.GetTicket, `{"ticket_id":"  "}`, ctx("user-a", "")), core.KindRejected, core.CodeInvalidArguments},
		{"get_ticket extra member", body(core.GetTicket, `{"ticket_id":"ticket-1","title":"t"}`, ctx("user-a", "")), core.KindRejected, core.CodeInvalidArguments},
		{"get_ticket ticket_id number", body(core.GetTicket, `{"ticket_id":1}`, ctx("user-a", "")), core.KindRejected, core.CodeInvalidArguments},
		{"get_ticket missing ticket", body(core.GetTicket, `{"ticket_id":"ticket-404"}`, ctx("user-a", "")), core.KindRejected, core.CodeTicketNotFound},
		{"get_ticket other tenant", body(core.GetTicket, `{"ticket_id":"ticket-1"}`, ctx("user-c", "")), core.KindRejected, core.CodeTicketNotFound},
	}
	for _, r := range rows {
		for _, policy := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
			t.Run(string(policy)+"/"+r.name, func(t *testing.T) {
				f := newFixture(policy)
				if out := f.handle(t, create("user-a", "seed", okArgs)); out.Kind != core.KindCreated || coretest.TicketID(out) != "ticket-1" {
					t.Fatalf("seed call: %+v", out)
				}
				before, calls := f.count(), f.store.Calls()
				out := f.handle(t, r.body)
				if out.Kind != r.kind || out.Code != r.code {
					t.Fatalf("got %v code %q (%s); want %v code %q", out.Kind, out.Code, out.Message, r.kind, r.code)
				}
				// An unknown or disabled user is refused before the store
				// is read or written.
				if out.Kind == core.KindForbidden && f.store.Calls() != calls {
					t.Fatalf("a forbidden call touched the store: %d calls, want %d", f.store.Calls(), calls)
				}
				if after := f.count(); after != before {
					t.Fatalf("a rejected call wrote: (ops, tickets) %v -> %v", before, after)
				}
				if out.Key != "" || coretest.TicketID(out) != "" || out.Body != nil {
					t.Fatalf("a rejection carries a key, ticket or result: %+v", out)
				}
				if out.Kind == core.KindRejected {
					checkMessage(t, out.Message)
				}
				// Names are case-sensitive: a message must not teach the
				// model "Create_ticket" or "Title" (a name the caller sent,
				// quoted, is echoed as sent).
				unquoted := quoted.ReplaceAllString(out.Message, `""`)
				for _, name := range []string{"Create_ticket", "Get_ticket", "Title", "Description", "Priority", "Ticket_id"} {
					if strings.Contains(unquoted, name) {
						t.Fatalf("message %q changes the case of %s", out.Message, strings.ToLower(name))
					}
				}
				var call struct {
					Function struct{ Name string } `json:"function"`
				}
				_ = json.Unmarshal([]byte(r.body), &call)
				if out.Function != call.Function.Name {
					t.Fatalf("Outcome.Function = %q; want %q for the log", out.Function, call.Function.Name)
				}
			})
		}
	}
}

// TestInvalidArgumentsNeverEchoValues: the message says what to correct
// but never repeats the argument's text.
func TestInvalidArgumentsNeverEchoValues(t *testing.T) {
	const secret = "SECRET-VALUE-7f3a"
	for _, args := range []string{
		`{"title":` + q(secret+strings.Repeat("x", 200)) + `}`,
		`{"title":` + q(secret+"\n") + `}`,
		`{"title":"t","description":` + q(secret+strings.Repeat("x", 4000)) + `}`,
		`{"title":"t","priority":` + q(secret) + `}`,
		`{"title":` + q(secret) + `,"title":"b"}`,
		`{"title":"t","description":"\ud800` + secret + `"}`,
	} {
		out := newFixture(idem.PolicyArguments).handle(t, create("user-a", "r-1", args))
		if out.Code != core.CodeInvalidArguments {
			t.Fatalf("%s: got %q; want invalid_arguments", clip(args), out.Code)
		}
		if strings.Contains(out.Message, secret) {
			t.Fatalf("message echoes the value: %q", out.Message)
		}
	}
}

// TestHandleAccepts: the edges that must be accepted are (nothing
// rejected at 128 characters of request_id or 200 of title).
func TestHandleAccepts(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"request_id 128 chars", create("user-a", strings.Repeat("r", 128), okArgs)},
		{"request_id 128 multibyte chars", create("user-a", strings.Repeat("é", 128), okArgs)},
		{"request_id with unicode and spaces", create("user-a", "req 日本 <>&\u2028", okArgs)},
		{"title 200 chars", create("user-a", "r-1", `{"title":`+q(strings.Repeat("t", 200))+`}`)},
		{"title 200 chars inside spaces", create("user-a", "r-1", `{"title":`+q("   "+strings.Repeat("t", 200)+"   ")+`}`)},
		{"title 200 chars inside unicode spaces", create("user-a", "r-1", `{"title":`+q("\u00a0\u3000"+strings.Repeat("日", 200)+"\u2003")+`}`)},
		{"title 1 char", create("user-a", "r-1", `{"title":"x"}`)},
		{"title with inner spaces", create("user-a", "r-1", `{"title":"a  b\u00a0c"}`)},
		{"description 4000 chars", create("user-a", "r-1", `{"title":"t","description":`+q(strings.Repeat("é", 4000))+`}`)},
		{"description with line breaks", create("user-a", "r-1", `{"title":"t","description":"a\nb\tc"}`)},
		{"description empty", create("user-a", "r-1", `{"title":"t","description":""}`)},
		{"description null", create("user-a", "r-1", `{"title":"t","description":null}`)},
		{"priority null", create("user-a", "r-1", `{"title":"t","priority":null}`)},
		{"priority low", create("user-a", "r-1", `{"title":"t","priority":"low"}`)},
		{"priority normal", create("user-a", "r-1", `{"title":"t","priority":"normal"}`)},
		{"priority urgent", create("user-a", "r-1", `{"title":"t","priority":"urgent"}`)},
		{"unknown fields around", `{"type":"tool_call","extra":1,"function":{"name":"create_ticket","content":{"title":"t"},"x":[]},` +
			`"context":{"externalUserId":"user-a","metadata":{"request_id":"r-1","trace":"z"},"callSource":"SomethingNew","moment":null,"conversationToken":null}}`},
		{"type absent", `{"function":{"name":"create_ticket","content":{"title":"t"}},"context":{"externalUserId":"user-a","metadata":{"request_id":"r-1"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(idem.PolicyArguments)
			out := f.handle(t, tc.body)
			if out.Kind != core.KindCreated {
				t.Fatalf("got %v code %q: %s; want created", out.Kind, out.Code, out.Message)
			}
			if f.count() != [2]int{1, 1} {
				t.Fatalf("store holds %v; want one operation and one ticket", f.count())
			}
		})
	}
}

func TestCreateThenDuplicate(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	first := f.handle(t, create("user-a", "r-1", okArgs))
	if first.Kind != core.KindCreated || coretest.TicketID(first) != "ticket-1" || first.TenantID != "tenant-a" ||
		first.Function != core.CreateTicket || len(first.Key) != 64 {
		t.Fatalf("first call: %+v", first)
	}
	canonical, _ := idem.Canonical([]byte(okArgs))
	wantKey, _ := idem.Key(idem.PolicyArguments, "tenant-a", "r-1", core.CreateTicket, canonical)
	if first.Key != wantKey {
		t.Fatalf("key %s; want idem.Key of tenant, request_id, function, canonical = %s", first.Key, wantKey)
	}
	ticket, err := f.store.Ticket(context.Background(), "ticket-1")
	if err != nil {
		t.Fatal(err)
	}
	if ticket.TenantID != "tenant-a" || ticket.UserID != "alice" || ticket.OperationKey != first.Key ||
		ticket.Arguments != canonical || !ticket.CreatedAt.Equal(now) {
		t.Fatalf("stored ticket %+v", ticket)
	}

	for _, tc := range []struct{ name, args string }{
		{"same arguments", okArgs},
		{"key-order variant", `{"priority":"high","description":"Since Monday.","title":"Cannot sign in"}`},
		{"whitespace variant", " {\n\"title\" : \"Cannot sign in\",\t\"priority\":\"high\", \"description\":\"Since Monday.\" } "},
		{"escape variant", `{"title":"Cannot sign \u0069n","description":"Since Monday\u002e","priority":"high"}`},
	} {
		before := f.count()
		out := f.handle(t, create("user-a", "r-1", tc.args))
		if out.Kind != core.KindDuplicate || coretest.TicketID(out) != "ticket-1" || out.Key != first.Key {
			t.Fatalf("%s: %+v; want duplicate of ticket-1", tc.name, out)
		}
		if want := `{"status":"created","ticket_id":"ticket-1","deduplicated":true}`; string(out.Body) != want {
			t.Fatalf("%s: replayed result %s; want %s", tc.name, out.Body, want)
		}
		if f.count() != before {
			t.Fatalf("%s: a duplicate wrote: %v -> %v", tc.name, before, f.count())
		}
	}
	// A repeat with the context's other fields changed is the same call:
	// conversationToken, callSource and moment are never part of the key.
	other := `{"type":"tool_call","function":{"name":"create_ticket","content":` + okArgs + `},` +
		`"context":{"externalUserId":"user-a","metadata":{"request_id":"r-1"},"callSource":"Other","conversationToken":"conv-999","moment":"2030-01-01T00:00:00Z"}}`
	if out := f.handle(t, other); out.Kind != core.KindDuplicate || coretest.TicketID(out) != "ticket-1" {
		t.Fatalf("changed conversationToken/moment: %+v; want duplicate", out)
	}
	// Changed arguments are a new operation under policy arguments.
	changed := f.handle(t, create("user-a", "r-1", `{"title":"Cannot sign in","priority":"low"}`))
	if changed.Kind != core.KindCreated || coretest.TicketID(changed) == "ticket-1" || changed.Key == first.Key {
		t.Fatalf("changed arguments: %+v; want a new ticket", changed)
	}
	// So is another request_id.
	if out := f.handle(t, create("user-a", "r-2", okArgs)); out.Kind != core.KindCreated {
		t.Fatalf("another request_id: %+v; want created", out)
	}
	if f.count() != [2]int{3, 3} {
		t.Fatalf("store holds %v; want 3 operations and 3 tickets", f.count())
	}
}

func TestPolicyRequest(t *testing.T) {
	f := newFixture(idem.PolicyRequest)
	first := f.handle(t, create("user-a", "r-1", okArgs))
	if first.Kind != core.KindCreated {
		t.Fatalf("first: %+v", first)
	}
	wantKey, _ := idem.Key(idem.PolicyRequest, "tenant-a", "r-1", core.CreateTicket, "")
	if first.Key != wantKey {
		t.Fatalf("key %s; want the request key %s", first.Key, wantKey)
	}
	before := f.count()
	mismatch := f.handle(t, create("user-a", "r-1", `{"title":"Cannot sign in","priority":"low"}`))
	if mismatch.Kind != core.KindRejected || mismatch.Code != core.CodeArgumentsMismatch || coretest.TicketID(mismatch) != "" {
		t.Fatalf("changed arguments: %+v; want arguments_mismatch", mismatch)
	}
	checkMessage(t, mismatch.Message)
	if f.count() != before {
		t.Fatalf("arguments_mismatch wrote: %v -> %v", before, f.count())
	}
	same := f.handle(t, create("user-a", "r-1", `{"priority":"high","title":"Cannot sign in","description":"Since Monday."}`))
	if same.Kind != core.KindDuplicate || coretest.TicketID(same) != coretest.TicketID(first) {
		t.Fatalf("same arguments in another order: %+v; want duplicate", same)
	}
	// Another user of the tenant reusing the request_id with other
	// arguments is a conflict, not a mismatch: authorization comes first.
	if out := f.handle(t, create("user-b", "r-1", `{"title":"x"}`)); out.Kind != core.KindConflict || out.Code != core.CodeRequestIDConflict {
		t.Fatalf("other user, other arguments: %+v; want request_id_conflict", out)
	}
	if f.count() != before {
		t.Fatalf("store changed: %v -> %v", before, f.count())
	}
}

func TestTenantIsolation(t *testing.T) {
	for _, policy := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
		f := newFixture(policy)
		a := f.handle(t, create("user-a", "r-1", okArgs))
		c := f.handle(t, create("user-c", "r-1", okArgs))
		if a.Kind != core.KindCreated || c.Kind != core.KindCreated || coretest.TicketID(a) == coretest.TicketID(c) || a.Key == c.Key {
			t.Fatalf("%s: same request_id and arguments in two tenants: %+v / %+v; want two tickets", policy, a, c)
		}
		if a.TenantID != "tenant-a" || c.TenantID != "tenant-b" {
			t.Fatalf("%s: tenants %q %q", policy, a.TenantID, c.TenantID)
		}
		if f.count() != [2]int{2, 2} {
			t.Fatalf("%s: store %v", policy, f.count())
		}
	}
}

func TestRequestIDConflict(t *testing.T) {
	for _, policy := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
		f := newFixture(policy)
		f.handle(t, create("user-a", "r-1", okArgs))
		before := f.count()
		out := f.handle(t, create("user-b", "r-1", okArgs))
		if out.Kind != core.KindConflict || out.Code != core.CodeRequestIDConflict || coretest.TicketID(out) != "" || out.Body != nil {
			t.Fatalf("%s: other user of the tenant, same request_id and arguments: %+v; want request_id_conflict", policy, out)
		}
		checkMessage(t, out.Message)
		if f.count() != before {
			t.Fatalf("%s: conflict wrote: %v -> %v", policy, before, f.count())
		}
	}
}

// keyOf is the key the service derives for user-a (tenant-a) and args.
func keyOf(t *testing.T, policy idem.Policy, requestID, args string) (key, fingerprint string) {
	t.Helper()
	canonical, err := idem.Canonical([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	return idem.Key(policy, "tenant-a", requestID, core.CreateTicket, canonical)
}

func TestPendingOperation(t *testing.T) {
	for _, policy := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
		f := newFixture(policy)
		key, fp := keyOf(t, policy, "r-1", okArgs)
		f.store.Put(idem.Record{Key: key, State: idem.StatePending, Tenant: "tenant-a", Owner: "alice",
			Function: core.CreateTicket, Fingerprint: fp, CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		before := f.count()
		out := f.handle(t, create("user-a", "r-1", okArgs))
		if out.Kind != core.KindInProgress || out.Key != key || coretest.TicketID(out) != "" {
			t.Fatalf("%s: pending operation: %+v; want in_progress", policy, out)
		}
		checkMessage(t, out.Message)
		if f.count() != before {
			t.Fatalf("%s: a pending operation was re-executed: %v -> %v", policy, before, f.count())
		}
		// Another user of the tenant learns nothing about it.
		if out := f.handle(t, create("user-b", "r-1", okArgs)); out.Kind != core.KindConflict {
			t.Fatalf("%s: other user on a pending operation: %+v; want request_id_conflict", policy, out)
		}
	}
}

func TestExpiredOperationIsReclaimed(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	key, fp := keyOf(t, idem.PolicyArguments, "r-1", okArgs)
	old := idem.Record{Key: key, State: idem.StateCompleted, Tenant: "tenant-a", Owner: "alice",
		Function: core.CreateTicket, Fingerprint: fp, Result: []byte(`{"status":"created","ticket_id":"old"}`),
		CreatedAt: now.Add(-25 * time.Hour), ExpiresAt: now.Add(-time.Second)}
	f.store.Put(old)
	out := f.handle(t, create("user-a", "r-1", okArgs))
	if out.Kind != core.KindCreated || coretest.TicketID(out) == "old" || out.Key != key {
		t.Fatalf("expired operation: %+v; want a new ticket under the same key", out)
	}
	if f.count() != [2]int{1, 1} {
		t.Fatalf("store %v; want the operation replaced and one ticket", f.count())
	}
	// An operation that expires exactly now is still live.
	g := newFixture(idem.PolicyArguments)
	old.ExpiresAt = now
	g.store.Put(old)
	if out := g.handle(t, create("user-a", "r-1", okArgs)); out.Kind != core.KindDuplicate || coretest.TicketID(out) != "old" {
		t.Fatalf("operation expiring now: %+v; want duplicate of old", out)
	}
	// A pending operation past its expiry is absent too.
	h := newFixture(idem.PolicyArguments)
	old.State, old.Result, old.ExpiresAt = idem.StatePending, nil, now.Add(-time.Second)
	h.store.Put(old)
	if out := h.handle(t, create("user-a", "r-1", okArgs)); out.Kind != core.KindCreated {
		t.Fatalf("expired pending operation: %+v; want created", out)
	}
}

// TestUserDisabledAfterCreating: a user who created a ticket and is then
// disabled gets 403 for the repeat and for get_ticket of that ticket,
// before the store is read: nothing stored is disclosed.
func TestUserDisabledAfterCreating(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	enabled := memstore.Users{"user-e": {TenantID: "tenant-a", UserID: "erin"}}
	f.svc.Users = enabled
	first := f.handle(t, create("user-e", "r-1", okArgs))
	if first.Kind != core.KindCreated {
		t.Fatalf("create: %+v", first)
	}
	enabled["user-e"] = core.User{TenantID: "tenant-a", UserID: "erin", Disabled: true}
	calls := f.store.Calls()
	for _, b := range []string{
		create("user-e", "r-1", okArgs),
		body(core.GetTicket, `{"ticket_id":`+q(coretest.TicketID(first))+`}`, ctx("user-e", "")),
	} {
		out := f.handle(t, b)
		if out.Kind != core.KindForbidden || out.Body != nil || out.Key != "" {
			t.Fatalf("disabled user got %+v; want forbidden, nothing disclosed", out)
		}
	}
	if f.store.Calls() != calls {
		t.Fatalf("the disabled user's calls touched the store: %d calls, want %d", f.store.Calls(), calls)
	}
}

func TestUnreadableStoredResult(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	key, fp := keyOf(t, idem.PolicyArguments, "r-1", okArgs)
	f.store.Put(idem.Record{Key: key, State: idem.StateCompleted, Tenant: "tenant-a", Owner: "alice",
		Fingerprint: fp, Result: []byte(`not json`), ExpiresAt: now.Add(time.Hour)})
	out := f.handle(t, create("user-a", "r-1", okArgs))
	if out.Kind != core.KindInternal || out.Err == nil {
		t.Fatalf("unreadable stored result: %+v; want internal", out)
	}
}

func TestGetTicket(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	created := f.handle(t, create("user-a", "r-1", `{"title":"Cannot sign in","description":"Since Monday."}`))
	urgent := f.handle(t, create("user-a", "r-2", `{"title":"Down","priority":"urgent"}`))
	if created.Kind != core.KindCreated || urgent.Kind != core.KindCreated {
		t.Fatalf("setup: %+v %+v", created, urgent)
	}
	before := f.count()
	get := func(user, id string, context string) core.Outcome {
		if context == "" {
			context = `{"externalUserId":` + q(user) + `}` // no metadata: get_ticket needs no request_id
		}
		return f.handle(t, body(core.GetTicket, `{"ticket_id":`+q(id)+`}`, context))
	}
	found := get("user-b", coretest.TicketID(created), "") // same tenant, another user
	want := core.TicketView{TicketID: coretest.TicketID(created), Title: "Cannot sign in", Description: "Since Monday.",
		Priority: "normal", Status: core.StatusOpen, CreatedAt: "2026-11-10T12:00:00Z", Comments: []core.CommentView{}}
	if tk := coretest.FoundTicket(found); found.Kind != core.KindFound || tk == nil || !reflect.DeepEqual(*tk, want) || found.TenantID != "tenant-a" {
		t.Fatalf("get_ticket: %+v (body %s); want %+v", found, found.Body, want)
	}
	if tk := coretest.FoundTicket(get("user-a", coretest.TicketID(urgent), "")); tk == nil || tk.Priority != "urgent" || tk.Description != "" {
		t.Fatalf("get_ticket urgent: %+v", tk)
	}
	if out := get("user-a", "  "+coretest.TicketID(created)+" ", ""); out.Kind != core.KindFound {
		t.Fatalf("ticket_id with spaces around: %+v; want found", out)
	}
	if out := get("user-a", coretest.TicketID(created), `{"externalUserId":"user-a","metadata":{"request_id":123}}`); out.Kind != core.KindFound {
		t.Fatalf("get_ticket with a non-string request_id: %+v; want found (request_id not checked)", out)
	}
	otherTenant := get("user-c", coretest.TicketID(created), "")
	missing := get("user-a", "ticket-404", "")
	for _, out := range []core.Outcome{otherTenant, missing} {
		if out.Kind != core.KindRejected || out.Code != core.CodeTicketNotFound || out.Body != nil {
			t.Fatalf("get_ticket: %+v; want ticket_not_found", out)
		}
	}
	if otherTenant.Message != missing.Message {
		t.Fatalf("another tenant's ticket and a missing one answer differently: %q / %q", otherTenant.Message, missing.Message)
	}
	if f.count() != before {
		t.Fatalf("get_ticket wrote: %v -> %v", before, f.count())
	}
}

// faultStore fails on purpose; calls are forwarded to memtest otherwise.
type faultStore struct {
	*memtest.Store
	create, ticket error
}

func (s faultStore) Claims() idem.Store[core.Writes] { return core.ClaimFunc(s.claim) }

func (s faultStore) claim(ctx context.Context, op idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	if s.create != nil {
		return nil, s.create
	}
	return s.Store.Claims().Claim(ctx, op, w, now)
}

func (s faultStore) Ticket(ctx context.Context, id string) (core.Ticket, error) {
	if s.ticket != nil {
		return core.Ticket{}, s.ticket
	}
	return s.Store.Ticket(ctx, id)
}

type faultUsers struct{ err error }

func (u faultUsers) User(context.Context, string) (core.User, error) { return core.User{}, u.err }

func TestStoreErrors(t *testing.T) {
	busy := fmt.Errorf("throttled: %w", core.ErrBusy)
	other := errors.New("disk on fire")
	getBody := body(core.GetTicket, `{"ticket_id":"ticket-1"}`, ctx("user-a", ""))
	for _, tc := range []struct {
		name    string
		store   faultStore
		users   core.Users
		body    string
		kind    core.Kind
		wantKey bool
	}{
		{"create busy", faultStore{create: core.ErrBusy}, users, create("user-a", "r-1", okArgs), core.KindBusy, true},
		{"create busy wrapped", faultStore{create: busy}, users, create("user-a", "r-1", okArgs), core.KindBusy, true},
		{"create other error", faultStore{create: other}, users, create("user-a", "r-1", okArgs), core.KindInternal, true},
		{"ticket busy", faultStore{ticket: busy}, users, getBody, core.KindBusy, false},
		{"ticket other error", faultStore{ticket: other}, users, getBody, core.KindInternal, false},
		{"users busy", faultStore{}, faultUsers{busy}, create("user-a", "r-1", okArgs), core.KindBusy, false},
		{"users other error", faultStore{}, faultUsers{other}, create("user-a", "r-1", okArgs), core.KindInternal, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(idem.PolicyArguments)
			tc.store.Store = f.store
			f.svc.Store, f.svc.Users = tc.store, tc.users
			out := f.handle(t, tc.body)
			if out.Kind != tc.kind || out.Err == nil {
				t.Fatalf("got %+v; want %v with the error kept for the log", out, tc.kind)
			}
			if (out.Key != "") != tc.wantKey {
				t.Fatalf("key %q; want one: %v", out.Key, tc.wantKey)
			}
			if tc.kind == core.KindBusy {
				checkMessage(t, out.Message)
			}
			// That nothing is written when the store fails is proven on
			// the real stores, with the fault inside their transaction
			// (storetest, sqlite_test, httpapi faults_test): this double
			// never writes.
		})
	}
}

// TestMessagesSayWhatToDoNext: every message the model can see is one or
// two sentences, ends with '.', and names an action.
func TestMessagesSayWhatToDoNext(t *testing.T) {
	f := newFixture(idem.PolicyRequest)
	f.handle(t, create("user-a", "r-1", okArgs))
	key, fp := keyOf(t, idem.PolicyRequest, "r-pending", okArgs)
	f.store.Put(idem.Record{Key: key, State: idem.StatePending, Tenant: "tenant-a", Owner: "alice",
		Fingerprint: fp, ExpiresAt: now.Add(time.Hour)})
	bodies := []string{
		body("nope", okArgs, ctx("user-a", "r-1")),
		body(core.CreateTicket, okArgs, ""),
		create("user-a", "", okArgs),
		create("user-a", strings.Repeat("r", 129), okArgs),
		body(core.CreateTicket, okArgs, `{"externalUserId":"user-a","metadata":{"request_id":1}}`),
		create("user-a", "r-2", `{}`),
		create("user-a", "r-2", `{"title":""}`),
		create("user-a", "r-2", `{"title":"a\nb"}`),
		create("user-a", "r-2", `{"title":`+q(strings.Repeat("t", 201))+`}`),
		create("user-a", "r-2", `{"title":"t","description":`+q(strings.Repeat("d", 4001))+`}`),
		create("user-a", "r-2", `{"title":"t","priority":"x"}`),
		create("user-a", "r-2", `{"title":"t","priority":1}`),
		create("user-a", "r-2", `{"title":"t","extra":1}`),
		create("user-a", "r-2", `{"title":"a","title":"b"}`),
		create("user-a", "r-2", `{"title":"t","description":"\udc00"}`),
		body(core.GetTicket, `{}`, ctx("user-a", "")),
		body(core.GetTicket, `{"ticket_id":"none"}`, ctx("user-a", "")),
		create("user-a", "r-1", `{"title":"other"}`), // arguments_mismatch
		create("user-b", "r-1", okArgs),              // request_id_conflict
		create("user-a", "r-pending", okArgs),        // in_progress
	}
	seen := map[string]bool{}
	for _, b := range bodies {
		out := f.handle(t, b)
		if out.Message == "" {
			t.Fatalf("%s: no message (%v)", clip(b), out.Kind)
		}
		checkMessage(t, out.Message)
		seen[out.Code+fmt.Sprint(out.Kind)] = true
	}
	if len(seen) != 9 { // 7 rejection codes, conflict, in_progress
		t.Fatalf("only %d distinct outcomes covered", len(seen))
	}
	// The busy message as well.
	g := newFixture(idem.PolicyArguments)
	g.svc.Store = faultStore{Store: g.store, create: core.ErrBusy}
	checkMessage(t, g.handle(t, create("user-a", "r-1", okArgs)).Message)
}

var quoted = regexp.MustCompile(`"[^"]*"`)

var actions = []string{"call", "tell", "check", "correct", "shorten", "send", "do not", "mint", "ask", "start"}

func checkMessage(t *testing.T, m string) {
	t.Helper()
	if m == "" || !strings.HasSuffix(m, ".") || strings.Contains(m, "..") {
		t.Fatalf("message %q: want text ending with '.' and no doubled '.'", m)
	}
	if n := strings.Count(m, ". ") + 1; n > 2 {
		t.Fatalf("message %q has %d sentences; want one or two", m, n)
	}
	lower := strings.ToLower(m)
	for _, a := range actions {
		if strings.Contains(lower, a) {
			return
		}
	}
	t.Fatalf("message %q does not say what to do next (none of %v)", m, actions)
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
