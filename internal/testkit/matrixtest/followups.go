package matrixtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// The destinations the follow-ups run against: one of each kind.
var followUpDests = []string{destZendesk, destWebhook, destLinear}

// thread is one ticket and its follow-ups, as outbox ids in commit order
// (comments, then the close).
type thread struct {
	ticket    string
	followUps []string
}

// keyOf is the delivery key of an outbox id: the id after its kind.
func keyOf(id string) string { _, key, _ := strings.Cut(id, "#"); return key }

// wantOrder is what the helpdesk must hold of th, in order, on dest: the
// ticket, each comment, then the close (on Linear, the close's
// resolution comment and the move to a completed state).
func (th thread) wantOrder(dest string, created bool) []string {
	var want []string
	if created {
		want = append(want, "create")
	}
	for _, id := range th.followUps {
		switch {
		case strings.HasPrefix(id, "COMMENT#"):
			want = append(want, "comment:"+keyOf(id))
		case dest == destLinear:
			want = append(want, "comment:"+keyOf(id), "state:completed")
		default:
			want = append(want, "close:"+keyOf(id))
		}
	}
	return want
}

// followUpRun is one destination's run: the store, the fake and the
// engine on the Env's clock, moved with the fake's.
type followUpRun struct {
	*engineRun
	dest string
}

func newFollowUpRun(t *testing.T, h deliverytest.Harness, dest string) *followUpRun {
	t.Helper()
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	d, _, _ := newDest(t, f, dest)
	e := deliverytest.NewEnv(t, h.Open(t), true)
	return &followUpRun{engineRun: &engineRun{t: t, e: e, f: f, eng: &delivery.Engine{Store: e.Store, Destination: d,
		MaxAttempts: matrixMaxAttempts, Lease: delivery.LeaseFor(matrixTimeout), CallTimeout: matrixTimeout,
		Now: func() time.Time { return e.Now }}}, dest: dest}
}

// open makes a ticket with comments comments, closed when close is set.
func (r *followUpRun) open(comments int, close bool) thread {
	th := thread{ticket: r.e.Create(`{"title":"Cannot sign in"}`)}
	for i := range comments {
		th.followUps = append(th.followUps, r.e.Comment(th.ticket, fmt.Sprintf("comment %d", i+1)))
	}
	if close {
		th.followUps = append(th.followUps, r.e.CloseTicket(th.ticket, "Password reset."))
	}
	return th
}

// run sweeps with workers side by side, moving the clocks past every wait
// (WaitRecheck, outcome windows, backoffs), until every id is final or the
// rounds run out.
func (r *followUpRun) run(workers int, ids ...string) {
	ctx := context.Background()
	for range 40 {
		deliverytest.SweepAll(ctx, r.eng, workers, 16)
		if !slices.ContainsFunc(ids, func(id string) bool { return r.e.Record(id).State.Live() }) {
			return
		}
		r.advance(r.e.Now.Add(delivery.WaitRecheck + time.Second))
	}
}

// all is every outbox id of ths.
func all(ths ...thread) []string {
	var ids []string
	for _, th := range ths {
		ids = append(append(ids, th.ticket), th.followUps...)
	}
	return ids
}

// RunFollowUps is the follow-ups' delivery over a store, against each
// destination of the fake helpdesk: order under concurrency, a comment
// whose send commits and drops, a worker that dies between a comment's
// send and its record, a ticket that failed, and one that is unknown
// until a person resolves it.
func RunFollowUps(t *testing.T, h deliverytest.Harness) {
	for _, dest := range followUpDests {
		t.Run(dest, func(t *testing.T) { runFollowUps(t, h, dest) })
	}
}

func runFollowUps(t *testing.T, h deliverytest.Harness, dest string) {
	t.Run("in order under concurrency", func(t *testing.T) {
		r := newFollowUpRun(t, h, dest)
		ths := []thread{r.open(2, true), r.open(3, false), r.open(0, true), r.open(1, true)}
		r.run(6, all(ths...)...)
		for _, th := range ths {
			for _, id := range append([]string{th.ticket}, th.followUps...) {
				if rec := r.e.Record(id); rec.State != delivery.StateDelivered || rec.Attempts != 1 {
					t.Errorf("%s: %s after %d attempts (%s); want delivered after one", id, rec.State, rec.Attempts, rec.Error)
				}
			}
			if got, want := r.f.Order(th.ticket), th.wantOrder(dest, true); !slices.Equal(got, want) {
				t.Errorf("the helpdesk holds %v of %s; want %v", got, th.ticket, want)
			}
		}
	})

	t.Run("a comment whose send commits and drops", func(t *testing.T) {
		r := newFollowUpRun(t, h, dest)
		th := r.open(2, true)
		r.f.Script(fakehelpdesk.Rule{Kind: commentKind(dest), N: 1, Fault: fakehelpdesk.CommitThenDrop()})
		r.run(2, all(th)...)
		if got, want := r.f.Order(th.ticket), th.wantOrder(dest, true); !slices.Equal(got, want) {
			t.Fatalf("the helpdesk holds %v; want %v, the dropped comment once", got, want)
		}
		if rec := r.e.Record(th.followUps[0]); rec.State != delivery.StateDelivered {
			t.Fatalf("the dropped comment: %+v", rec)
		}
	})

	t.Run("a worker that dies between a comment's send and its record", func(t *testing.T) {
		r := newFollowUpRun(t, h, dest)
		th := r.open(1, true)
		ctx := context.Background()
		// A worker claims the comment, and dies after sending it once the
		// ticket is delivered, before recording.
		c, err := r.e.Store.Claim(ctx, th.followUps[0], "dead-worker", r.e.Now, delivery.CeilSecond(r.e.Now.Add(r.eng.Lease)))
		if err != nil || c.Effect == nil {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		if st, err := r.eng.Deliver(ctx, th.ticket); err != nil || st != delivery.StateDelivered {
			t.Fatalf("the ticket: %s, %v", st, err)
		}
		ef := *c.Effect
		ef.TicketExternalID = r.e.Record(th.ticket).ExternalID
		if _, err := r.eng.Destination.(delivery.EffectSender).SendEffect(ctx, ef); err != nil {
			t.Fatalf("the dead worker's send: %v", err)
		}
		r.run(2, all(th)...)
		if got, want := r.f.Order(th.ticket), th.wantOrder(dest, true); !slices.Equal(got, want) {
			t.Fatalf("the helpdesk holds %v; want %v, the comment once", got, want)
		}
	})

	t.Run("a ticket that failed fails its follow-ups", func(t *testing.T) {
		r := newFollowUpRun(t, h, dest)
		r.f.Script(fakehelpdesk.Rule{Kind: createKind(dest), Times: 100, Fault: fakehelpdesk.Refuse(422)})
		th := r.open(2, true)
		r.run(3, all(th)...)
		if rec := r.e.Record(th.ticket); rec.State != delivery.StateFailed {
			t.Fatalf("the ticket: %+v; want failed", rec)
		}
		for _, id := range th.followUps {
			if rec := r.e.Record(id); rec.State != delivery.StateFailed || !strings.Contains(rec.Error, "ticket not delivered") || rec.Attempts != 0 {
				t.Errorf("%s: %s after %d attempts (%s); want failed, ticket not delivered, nothing sent", id, rec.State, rec.Attempts, rec.Error)
			}
		}
		if got := r.f.Order(th.ticket); len(got) != 0 {
			t.Fatalf("the helpdesk holds %v of a refused ticket", got)
		}
	})

	t.Run("an unknown ticket holds its follow-ups until a person resolves it", func(t *testing.T) {
		for _, resolved := range []delivery.State{delivery.StateDelivered, delivery.StateFailed} {
			t.Run(string(resolved), func(t *testing.T) {
				r := newFollowUpRun(t, h, dest)
				th := r.open(1, true)
				r.e.Finish(th.ticket, delivery.StateUnknown)
				r.run(2, th.followUps...)
				for _, id := range th.followUps {
					if rec := r.e.Record(id); rec.State != delivery.StatePending || rec.Attempts != 0 {
						t.Fatalf("%s while its ticket is unknown: %+v; want pending, waiting", id, rec)
					}
				}
				ctx := context.Background()
				if resolved == delivery.StateFailed {
					if err := delivery.ResolveFailed(ctx, r.e.Store, th.ticket, "not in the helpdesk", r.e.Now); err != nil {
						t.Fatal(err)
					}
				} else {
					// A person made the ticket in the helpdesk by hand.
					if _, err := r.eng.Destination.Send(ctx, delivery.HelpdeskTicket{ID: th.ticket, Title: "Cannot sign in",
						Priority: "normal", TenantID: "tenant-a", UserID: "alice", CreatedAt: r.e.Now}); err != nil {
						t.Fatal(err)
					}
					rc, found, err := r.eng.Destination.Lookup(ctx, th.ticket)
					if err != nil && dest != destWebhook || err == nil && !found {
						t.Fatalf("lookup of the ticket made by hand: %+v %v %v", rc, found, err)
					}
					if err := delivery.ResolveDelivered(ctx, r.e.Store, th.ticket, rc, r.e.Now); err != nil {
						t.Fatal(err)
					}
				}
				r.run(2, th.followUps...)
				for _, id := range th.followUps {
					if rec := r.e.Record(id); rec.State != resolved {
						t.Errorf("%s after the ticket was resolved %s: %+v", id, resolved, rec)
					}
				}
				if resolved == delivery.StateDelivered {
					if got, want := r.f.Order(th.ticket), th.wantOrder(dest, true); !slices.Equal(got, want) {
						t.Fatalf("the helpdesk holds %v; want %v", got, want)
					}
				}
			})
		}
	})
}

// commentKind and createKind are the fake's request kinds of a comment's
// send and of a ticket's create on dest.
func commentKind(dest string) fakehelpdesk.Kind {
	switch dest {
	case destZendesk:
		return fakehelpdesk.ZendeskUpdate
	case destLinear:
		return fakehelpdesk.LinearCommentCreate
	}
	return fakehelpdesk.WebhookCreate
}

func createKind(dest string) fakehelpdesk.Kind {
	switch dest {
	case destZendesk:
		return fakehelpdesk.ZendeskCreate
	case destLinear:
		return fakehelpdesk.LinearCreate
	}
	return fakehelpdesk.WebhookCreate
}
