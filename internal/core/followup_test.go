package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

// comment and closeCall build the follow-ups' callbacks.
func comment(user, requestID, ticketID, text string) string {
	return body(core.AddComment, `{"ticket_id":`+q(ticketID)+`,"body":`+q(text)+`}`, ctx(user, requestID))
}

func closeCall(user, requestID, ticketID, resolution string) string {
	args := `{"ticket_id":` + q(ticketID) + `}`
	if resolution != "" {
		args = `{"ticket_id":` + q(ticketID) + `,"resolution":` + q(resolution) + `}`
	}
	return body(core.CloseTicket, args, ctx(user, requestID))
}

// viewOf is get_ticket's ticket for user, failing the test on any other
// answer.
func (f *fixture) viewOf(t *testing.T, user, id string) *core.TicketView {
	t.Helper()
	o := f.handle(t, body(core.GetTicket, `{"ticket_id":`+q(id)+`}`, ctx(user, "")))
	v := coretest.FoundTicket(o)
	if v == nil {
		t.Fatalf("get_ticket %s: %v %s %s", id, o.Kind, o.Code, o.Body)
	}
	return v
}

// TestAddComment: a comment is created once under its key and replayed
// on a repeat, shown by get_ticket in commit order; a missing ticket, one
// of another tenant, a closed ticket and the 101st comment are rejected
// with their codes and write nothing (no operation, no item).
func TestAddComment(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	ticket := coretest.TicketID(f.handle(t, create("user-a", "r-1", okArgs)))
	first := f.handle(t, comment("user-a", "c-1", ticket, "It fails on my phone too.\n\tAndroid 15."))
	again := f.handle(t, comment("user-a", "c-1", ticket, "It fails on my phone too.\n\tAndroid 15."))
	want := `{"status":"created","comment_id":"ticket-2","ticket_id":"` + ticket + `","deduplicated":false}`
	if first.Kind != core.KindCreated || string(first.Body) != want || again.Kind != core.KindDuplicate ||
		string(again.Body) != strings.Replace(want, `"deduplicated":false`, `"deduplicated":true`, 1) {
		t.Fatalf("first %v %s, repeat %v %s; want created %s, then deduplicated", first.Kind, first.Body, again.Kind, again.Body, want)
	}
	if o := f.handle(t, comment("user-b", "c-1", ticket, "It fails on my phone too.\n\tAndroid 15.")); o.Kind != core.KindConflict {
		t.Fatalf("another user, same request: %v %s; want request_id_conflict", o.Kind, o.Code)
	}
	second := f.handle(t, comment("user-b", "c-2", "  "+ticket+" ", "Same here."))
	if second.Kind != core.KindCreated {
		t.Fatalf("second comment by another user of the tenant: %v %s %s", second.Kind, second.Code, second.Message)
	}
	v := f.viewOf(t, "user-a", ticket)
	if v.Status != core.StatusOpen || len(v.Comments) != 2 || v.Comments[0].CommentID != "ticket-2" ||
		v.Comments[0].Body != "It fails on my phone too.\n\tAndroid 15." || v.Comments[1].Body != "Same here." ||
		v.Comments[0].CreatedAt != "2026-11-10T12:00:00Z" || v.Comments[0].Delivery != nil {
		t.Fatalf("get_ticket after two comments: %+v", v)
	}

	before := f.count()
	for name, tc := range map[string]struct {
		call, code string
	}{
		"missing ticket":        {comment("user-a", "c-3", "no-such-ticket", "x"), core.CodeTicketNotFound},
		"another tenant's":      {comment("user-c", "c-3", ticket, "x"), core.CodeTicketNotFound},
		"body blank":            {comment("user-a", "c-3", ticket, " \n "), core.CodeInvalidArguments},
		"body carriage return":  {comment("user-a", "c-3", ticket, "a\rb"), core.CodeInvalidArguments},
		"no request_id":         {comment("user-a", "", ticket, "x"), core.CodeMissingRequestID},
		"body of 4001 chars":    {comment("user-a", "c-3", ticket, strings.Repeat("b", 4001)), core.CodeInvalidArguments},
		"ticket_id of a space ": {comment("user-a", "c-3", " ", "x"), core.CodeInvalidArguments},
	} {
		if o := f.handle(t, tc.call); o.Kind != core.KindRejected || o.Code != tc.code {
			t.Errorf("%s: %v %s %s; want rejected %s", name, o.Kind, o.Code, o.Message, tc.code)
		} else {
			checkMessage(t, o.Message)
		}
	}
	if after := f.count(); after != before {
		t.Fatalf("rejections wrote: %v → %v", before, after)
	}

	// Up to MaxComments, then too_many_comments, nothing written.
	for i := 2; i < core.MaxComments; i++ {
		if o := f.handle(t, comment("user-a", fmt.Sprintf("fill-%d", i), ticket, "more")); o.Kind != core.KindCreated {
			t.Fatalf("comment %d: %v %s", i+1, o.Kind, o.Code)
		}
	}
	before = f.count()
	if o := f.handle(t, comment("user-a", "c-101", ticket, "one too many")); o.Code != core.CodeTooManyComments {
		t.Fatalf("comment 101: %v %s; want too_many_comments", o.Kind, o.Code)
	} else {
		checkMessage(t, o.Message)
	}
	// A repeat of an earlier comment still replays on a full ticket.
	if o := f.handle(t, comment("user-a", "c-1", ticket, "It fails on my phone too.\n\tAndroid 15.")); o.Kind != core.KindDuplicate {
		t.Fatalf("repeat on a full ticket: %v %s", o.Kind, o.Code)
	}
	if after := f.count(); after != before {
		t.Fatalf("the 101st comment wrote: %v → %v", before, after)
	}
	if v := f.viewOf(t, "user-a", ticket); len(v.Comments) != core.MaxComments {
		t.Fatalf("%d comments shown; want %d", len(v.Comments), core.MaxComments)
	}
}

// TestCloseTicket: a close marks the ticket closed with its resolution,
// is replayed on a repeat, answers another close already_closed (stored:
// its repeat replays it) and makes every later comment ticket_closed,
// while a repeat of a comment made before still replays.
func TestCloseTicket(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	ticket := coretest.TicketID(f.handle(t, create("user-a", "r-1", okArgs)))
	if o := f.handle(t, comment("user-a", "c-1", ticket, "Before the close.")); o.Kind != core.KindCreated {
		t.Fatalf("comment: %v %s", o.Kind, o.Code)
	}
	if o := f.handle(t, closeCall("user-c", "x-1", ticket, "")); o.Code != core.CodeTicketNotFound {
		t.Fatalf("close by another tenant: %v %s; want ticket_not_found", o.Kind, o.Code)
	}
	closed := f.handle(t, closeCall("user-a", "x-1", ticket, "Password reset.\nWorks now."))
	want := `{"status":"closed","ticket_id":"` + ticket + `","deduplicated":false}`
	if closed.Kind != core.KindCreated || string(closed.Body) != want {
		t.Fatalf("close: %v %s; want %s", closed.Kind, closed.Body, want)
	}
	if o := f.handle(t, closeCall("user-a", "x-1", ticket, "Password reset.\nWorks now.")); o.Kind != core.KindDuplicate ||
		string(o.Body) != `{"status":"closed","ticket_id":"`+ticket+`","deduplicated":true}` {
		t.Fatalf("repeat of the close: %v %s", o.Kind, o.Body)
	}
	already := f.handle(t, closeCall("user-b", "x-2", ticket, ""))
	wantAlready := `{"status":"closed","ticket_id":"` + ticket + `","already_closed":true,"deduplicated":false}`
	if already.Kind != core.KindCreated || string(already.Body) != wantAlready {
		t.Fatalf("second close: %v %s; want %s", already.Kind, already.Body, wantAlready)
	}
	before := f.count()
	if o := f.handle(t, closeCall("user-b", "x-2", ticket, "")); o.Kind != core.KindDuplicate ||
		string(o.Body) != strings.Replace(wantAlready, `"deduplicated":false`, `"deduplicated":true`, 1) {
		t.Fatalf("repeat of the second close: %v %s", o.Kind, o.Body)
	}
	o := f.handle(t, comment("user-a", "c-2", ticket, "After the close."))
	if o.Code != core.CodeTicketClosed {
		t.Fatalf("comment on a closed ticket: %v %s; want ticket_closed", o.Kind, o.Code)
	}
	checkMessage(t, o.Message)
	if o := f.handle(t, comment("user-a", "c-1", ticket, "Before the close.")); o.Kind != core.KindDuplicate {
		t.Fatalf("repeat of a comment made before the close: %v %s; want its replay", o.Kind, o.Code)
	}
	if after := f.count(); after != before {
		t.Fatalf("calls on a closed ticket wrote: %v → %v", before, after)
	}
	v := f.viewOf(t, "user-b", ticket)
	if v.Status != core.StatusClosed || v.ClosedAt != "2026-11-10T12:00:00Z" || v.Resolution == nil ||
		*v.Resolution != "Password reset.\nWorks now." || len(v.Comments) != 1 {
		t.Fatalf("get_ticket of the closed ticket: %+v", v)
	}
	// A close without a resolution shows an empty one.
	other := coretest.TicketID(f.handle(t, create("user-a", "r-2", okArgs)))
	f.handle(t, closeCall("user-a", "x-3", other, ""))
	if v := f.viewOf(t, "user-a", other); v.Status != core.StatusClosed || v.Resolution == nil || *v.Resolution != "" {
		t.Fatalf("closed without a resolution: %+v", v)
	}
}

// TestCommentsRacingAClose: many comments and closes of one ticket at
// once. Exactly one close wins (the others answer already_closed), every
// comment answered created is in get_ticket, in its list before the close,
// and every other comment answered ticket_closed; nothing is lost.
func TestCommentsRacingAClose(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	var n sync.Mutex
	next := 0
	f.svc.NewID = func() string { n.Lock(); defer n.Unlock(); next++; return fmt.Sprintf("id-%d", next) }
	ticket := coretest.TicketID(f.handle(t, create("user-a", "r-1", okArgs)))
	const comments, closes = 40, 5
	outs := make([]core.Outcome, comments+closes)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			if i < comments {
				outs[i] = f.handle(t, comment("user-a", fmt.Sprintf("c-%d", i), ticket, fmt.Sprintf("comment %d", i)))
				return
			}
			outs[i] = f.handle(t, closeCall("user-a", fmt.Sprintf("x-%d", i), ticket, ""))
		})
	}
	wg.Wait()
	created := map[string]bool{}
	winners := 0
	for i, o := range outs {
		switch {
		case i < comments && o.Kind == core.KindCreated:
			var r core.CommentResult
			if err := json.Unmarshal(o.Body, &r); err != nil {
				t.Fatal(err)
			}
			created[r.CommentID] = true
		case i < comments && o.Code == core.CodeTicketClosed:
		case i >= comments && o.Kind == core.KindCreated && !strings.Contains(string(o.Body), "already_closed"):
			winners++
		case i >= comments && strings.Contains(string(o.Body), `"already_closed":true`):
		default:
			t.Fatalf("call %d: %v %s %s", i, o.Kind, o.Code, o.Body)
		}
	}
	v := f.viewOf(t, "user-a", ticket)
	if winners != 1 || v.Status != core.StatusClosed || len(v.Comments) != len(created) {
		t.Fatalf("%d closes won, status %s, %d comments shown of %d created", winners, v.Status, len(v.Comments), len(created))
	}
	for _, c := range v.Comments {
		if !created[c.CommentID] {
			t.Fatalf("comment %s shown but not answered created", c.CommentID)
		}
	}
	tk, err := f.store.Ticket(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	list := tk.Attrs.List(core.AttrFollowUps)
	if len(list) != len(created)+1 || !strings.HasPrefix(list[len(list)-1], "CLOSE#") {
		t.Fatalf("follow-ups %v; want the %d comments, then the close", list, len(created))
	}
}

// TestFollowUpsFollowTheirTicketsDelivery: the outbox rule. With a
// destination configured, a follow-up of a ticket that has a delivery
// record gets its own, pending and due at once; a follow-up of a ticket
// created while no destination was configured gets none, and neither does
// any follow-up while none is configured.
func TestFollowUpsFollowTheirTicketsDelivery(t *testing.T) {
	f := newFixture(idem.PolicyArguments)
	plain := coretest.TicketID(f.handle(t, create("user-a", "r-1", okArgs)))
	f.svc.Deliver = true
	outbox := coretest.TicketID(f.handle(t, create("user-a", "r-2", okArgs)))
	f.handle(t, comment("user-a", "c-1", plain, "on the plain ticket"))
	f.handle(t, comment("user-a", "c-2", outbox, "on the delivered ticket"))
	f.handle(t, closeCall("user-a", "x-1", outbox, "done"))
	ctx := context.Background()
	if v := f.viewOf(t, "user-a", plain); len(v.Comments) != 1 || v.Comments[0].Delivery != nil {
		t.Fatalf("comment of a ticket without delivery: %+v", v.Comments)
	}
	v := f.viewOf(t, "user-a", outbox)
	if len(v.Comments) != 1 || v.Comments[0].Delivery == nil || v.Comments[0].Delivery.State != "pending" {
		t.Fatalf("comment of a delivered ticket: %+v", v.Comments)
	}
	tk, _ := f.store.Ticket(ctx, outbox)
	for _, key := range tk.Attrs.List(core.AttrFollowUps) {
		r, err := f.store.Delivery(ctx, key)
		if err != nil || r.State != delivery.StatePending || !r.DueAt.Equal(now) || r.Kind == delivery.KindTicket {
			t.Fatalf("%s: %+v, %v; want pending, due at once", key, r, err)
		}
	}
	third := coretest.TicketID(f.handle(t, create("user-a", "r-3", okArgs)))
	f.svc.Deliver = false
	if o := f.handle(t, comment("user-a", "c-3", third, "while no destination is configured")); o.Kind != core.KindCreated {
		t.Fatalf("comment: %v %s", o.Kind, o.Code)
	}
	if v := f.viewOf(t, "user-a", third); len(v.Comments) != 1 || v.Comments[0].Delivery != nil {
		t.Fatalf("comment made while no destination is configured: %+v", v.Comments)
	}
}
