package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

// Comment sends add_comment for user.
func (e *Env) Comment(user, requestID, ticketID, body string) core.Outcome {
	e.T.Helper()
	content, _ := json.Marshal(map[string]string{"ticket_id": ticketID, "body": body})
	return e.Svc.Answer(context.Background(), core.Call{Function: core.AddComment, Content: content,
		ExternalUserID: user, RequestID: requestID})
}

// Close sends close_ticket for user, with a resolution when not "".
func (e *Env) Close(user, requestID, ticketID, resolution string) core.Outcome {
	e.T.Helper()
	args := map[string]string{"ticket_id": ticketID}
	if resolution != "" {
		args["resolution"] = resolution
	}
	content, _ := json.Marshal(args)
	return e.Svc.Answer(context.Background(), core.Call{Function: core.CloseTicket, Content: content,
		ExternalUserID: user, RequestID: requestID})
}

// View is get_ticket's ticket for user, failing the test on any other
// answer: the read that must see every write whose answer was returned.
func (e *Env) View(user, ticketID string) *core.TicketView {
	e.T.Helper()
	o := e.Get(user, ticketID)
	v := coretest.FoundTicket(o)
	if v == nil {
		e.T.Fatalf("get_ticket %s: %v %s %v", ticketID, o.Kind, o.Code, o.Err)
	}
	return v
}

// wantBody fails t unless o is of kind k with exactly body.
func wantBody(t *testing.T, o core.Outcome, k core.Kind, body string) {
	t.Helper()
	if o.Kind != k || string(o.Body) != body {
		t.Fatalf("%v %s (code %q, err %v); want %v %s", o.Kind, o.Body, o.Code, o.Err, k, body)
	}
}

// wantCode fails t unless o is a rejection with code.
func wantCode(t *testing.T, o core.Outcome, code string) {
	t.Helper()
	if o.Kind != core.KindRejected || o.Code != code {
		t.Fatalf("%v %q (err %v); want rejected %s", o.Kind, o.Code, o.Err, code)
	}
}

// RunFollowUps runs add_comment and close_ticket over the store through
// the real service: each answer of docs/contract.md's follow-ups (created,
// deduplicated, conflict, mismatch, ticket_not_found for a missing and for
// another tenant's ticket, ticket_closed, too_many_comments,
// already_closed), nothing written by a rejection, get_ticket right after
// each answer, and comments racing closes with one order winning and
// nothing lost.
func RunFollowUps(t *testing.T, h Harness) {
	env := func(t *testing.T, policy idem.Policy) *Env {
		e := &Env{T: t, Now: time.Now().UTC().Truncate(time.Second)}
		s, _ := h.Open(t, e.Clock)
		e.serve(s, policy)
		return e
	}
	t.Run("answers", func(t *testing.T) {
		e := env(t, idem.PolicyRequest)
		ticket := coretest.TicketID(e.Create("user-a", "r-1", title))
		first := e.Comment("user-a", "c-1", ticket, "It fails on my phone too.\nAndroid 15.")
		var c core.CommentResult
		if err := json.Unmarshal(first.Body, &c); err != nil || first.Kind != core.KindCreated || c.TicketID != ticket {
			t.Fatalf("add_comment: %v %s", first.Kind, first.Body)
		}
		if v := e.View("user-c", ticket); len(v.Comments) != 1 || v.Comments[0].CommentID != c.CommentID ||
			v.Comments[0].Body != "It fails on my phone too.\nAndroid 15." || v.Status != core.StatusOpen {
			t.Fatalf("get_ticket right after the comment: %+v", v)
		}
		wantBody(t, e.Comment("user-a", "c-1", ticket, "It fails on my phone too.\nAndroid 15."), core.KindDuplicate,
			strings.Replace(string(first.Body), `"deduplicated":false`, `"deduplicated":true`, 1))
		Want(t, e.Comment("user-c", "c-1", ticket, "It fails on my phone too.\nAndroid 15."), core.KindConflict)
		wantCode(t, e.Comment("user-a", "c-1", ticket, "other words"), core.CodeArgumentsMismatch)
		wantCode(t, e.Comment("user-a", "c-2", "no-such-ticket", "x"), core.CodeTicketNotFound)
		wantCode(t, e.Comment("user-b", "c-2", ticket, "x"), core.CodeTicketNotFound)
		wantCode(t, e.Close("user-b", "x-1", ticket, ""), core.CodeTicketNotFound)
		if v := e.View("user-a", ticket); len(v.Comments) != 1 {
			t.Fatalf("rejections wrote comments: %+v", v.Comments)
		}

		closed := e.Close("user-a", "x-1", ticket, "Password reset.")
		wantBody(t, closed, core.KindCreated, `{"status":"closed","ticket_id":"`+ticket+`","deduplicated":false}`)
		if v := e.View("user-c", ticket); v.Status != core.StatusClosed || v.Resolution == nil || *v.Resolution != "Password reset." || v.ClosedAt == "" {
			t.Fatalf("get_ticket right after the close: %+v", v)
		}
		wantBody(t, e.Close("user-a", "x-1", ticket, "Password reset."), core.KindDuplicate,
			`{"status":"closed","ticket_id":"`+ticket+`","deduplicated":true}`)
		wantBody(t, e.Close("user-c", "x-2", ticket, ""), core.KindCreated,
			`{"status":"closed","ticket_id":"`+ticket+`","already_closed":true,"deduplicated":false}`)
		wantBody(t, e.Close("user-c", "x-2", ticket, ""), core.KindDuplicate,
			`{"status":"closed","ticket_id":"`+ticket+`","already_closed":true,"deduplicated":true}`)
		wantCode(t, e.Comment("user-a", "c-3", ticket, "After the close."), core.CodeTicketClosed)
		Want(t, e.Comment("user-a", "c-1", ticket, "It fails on my phone too.\nAndroid 15."), core.KindDuplicate)
		if v := e.View("user-a", ticket); len(v.Comments) != 1 || v.Status != core.StatusClosed {
			t.Fatalf("after the close: %+v", v)
		}
	})

	t.Run("the 101st comment", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		ticket := coretest.TicketID(e.Create("user-a", "r-1", title))
		for i := range core.MaxComments {
			Want(t, e.Comment("user-a", fmt.Sprintf("c-%d", i), ticket, fmt.Sprintf("comment %d", i+1)), core.KindCreated)
		}
		wantCode(t, e.Comment("user-a", "c-101", ticket, "one too many"), core.CodeTooManyComments)
		v := e.View("user-a", ticket)
		if len(v.Comments) != core.MaxComments || v.Comments[0].Body != "comment 1" || v.Comments[core.MaxComments-1].Body != fmt.Sprintf("comment %d", core.MaxComments) {
			t.Fatalf("%d comments, first %+v", len(v.Comments), v.Comments[0])
		}
		// A full ticket still closes.
		Want(t, e.Close("user-a", "x-1", ticket, ""), core.KindCreated)
	})

	t.Run("comments racing closes", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		ticket := coretest.TicketID(e.Create("user-a", "r-1", title))
		const comments, closes = 12, 3
		outs := make([]core.Outcome, comments+closes)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range outs {
			wg.Go(func() {
				<-start
				// A busy answer wrote nothing and is retried with the same
				// request, as a client does.
				for try := 0; try == 0 || outs[i].Kind == core.KindBusy && try < 20; try++ {
					if i < comments {
						outs[i] = e.Comment("user-a", fmt.Sprintf("c-%d", i), ticket, fmt.Sprintf("comment %d", i))
					} else {
						outs[i] = e.Close("user-a", fmt.Sprintf("x-%d", i), ticket, "")
					}
				}
			})
		}
		close(start)
		wg.Wait()
		created, won := map[string]bool{}, 0
		for i, o := range outs {
			switch {
			case i < comments && o.Kind == core.KindCreated:
				var c core.CommentResult
				_ = json.Unmarshal(o.Body, &c)
				created[c.CommentID] = true
			case i < comments && o.Code == core.CodeTicketClosed:
			case i >= comments && o.Kind == core.KindCreated && !strings.Contains(string(o.Body), "already_closed"):
				won++
			case i >= comments && o.Kind == core.KindCreated:
			default:
				t.Fatalf("call %d: %v %s %s %v", i, o.Kind, o.Code, o.Body, o.Err)
			}
		}
		v := e.View("user-a", ticket)
		if won != 1 || v.Status != core.StatusClosed || len(v.Comments) != len(created) {
			t.Fatalf("%d closes won, status %s, %d comments shown of %d created", won, v.Status, len(v.Comments), len(created))
		}
		for _, c := range v.Comments {
			if !created[c.CommentID] {
				t.Fatalf("comment %s shown but never answered created", c.CommentID)
			}
		}
		// One order: every comment answered created is before the close.
		tk, err := e.Store.Ticket(context.Background(), ticket)
		if err != nil {
			t.Fatal(err)
		}
		list := tk.Attrs.List(core.AttrFollowUps)
		if len(list) != len(created)+1 || !strings.HasPrefix(list[len(list)-1], core.EffectKeyPrefix(core.KindClose)) {
			t.Fatalf("follow-ups %v; want the %d comments, then the close", list, len(created))
		}
	})
}
