package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/benchtest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// BenchmarkDeliveryStreamFollowUps is BenchmarkDeliveryStreamLambda's
// stream path (lambdaPoller with template.yaml's settings, the delivery
// function's handler, the Zendesk adapter, the fake helpdesk answering
// every create and every update in benchtest.HelpdeskDelay) delivering b.N
// threads: a create_ticket, an add_comment on it and a close_ticket of it,
// committed back to back, one thread after another. The follow-ups are
// committed while their ticket is still on its way, so each waits for it;
// the worker that records the ticket delivered moves on to the comment,
// then to the close. Reports the time from the ticket's delivered record
// to the comment's (comment-p50-ms, comment-p99-ms) and to the close's
// (close-p50-ms, close-p99-ms); the ticket's own time from commit to
// delivered (ticket-p50-ms, ticket-p99-ms); threads delivered per second;
// helpdesk calls per record (three records a thread); and late-followups,
// the follow-ups committed only after their ticket was delivered (their
// time then starts at their own commit, not at the ticket's delivery).
// Every run checks that the helpdesk holds each thread once, in order:
// create, comment, close.
func BenchmarkDeliveryStreamFollowUps(b *testing.B) {
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newStreamRig(b)
	r.fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskUpdate, Times: 1 << 30, Fault: fakehelpdesk.Fault{Delay: benchtest.HelpdeskDelay}})
	timed := benchtest.NewSequencedTimer(r.store)
	h := deliveryHandler(delivery.Engine{}, timed, r.dst)
	run := time.Now().UnixNano()
	var seq int
	svc := deliverytest.NewService(r.store, true, func() string { seq++; return fmt.Sprintf("sf-%d-%d", run, seq) })

	pollErr := make(chan error, 1)
	go func() { pollErr <- lambdaPoller(ctx, r.endpoint, r.streamARN, h, templateESM(b)) }()

	type thread struct {
		ticket, comment, close     string    // outbox ids
		created, commented, closed time.Time // commits
		commentID                  string
	}
	threads := make([]thread, b.N)
	start := time.Now()
	b.StartTimer()
	for i := range threads {
		th := &threads[i]
		out := createTicket(ctx, svc, fmt.Sprintf("r%d-%d", run, i))
		th.ticket, th.created = coretest.TicketID(out), time.Now()
		var c core.CommentResult
		decode(b, followUp(ctx, svc, core.AddComment, map[string]string{"ticket_id": th.ticket, "body": "It also fails on my phone."},
			fmt.Sprintf("c%d-%d", run, i)), &c)
		th.commentID, th.comment, th.commented = c.CommentID, core.EffectKeyPrefix(core.KindComment)+c.CommentID, time.Now()
		followUp(ctx, svc, core.CloseTicket, map[string]string{"ticket_id": th.ticket, "resolution": "It works now, thanks."},
			fmt.Sprintf("x%d-%d", run, i))
		th.closed = time.Now()
	}
	for deadline := time.Now().Add(2 * time.Minute); timed.Delivered() < 3*b.N; time.Sleep(5 * time.Millisecond) {
		select {
		case err := <-pollErr:
			b.Fatalf("stream poller: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d records delivered after two minutes", timed.Delivered(), 3*b.N)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-pollErr; err != nil {
		b.Fatalf("stream poller: %v", err)
	}

	var ticketLat, commentLat, closeLat []time.Duration
	late := 0
	for i := range threads {
		th := &threads[i]
		t, err := r.store.Ticket(context.Background(), th.ticket)
		if err != nil {
			b.Fatal(err)
		}
		closeID := t.Attrs.Str(core.AttrCloseID)
		th.close = core.EffectKeyPrefix(core.KindClose) + closeID
		want := []string{"create", "comment:" + th.commentID, "close:" + closeID}
		if got := r.fake.Order(th.ticket); !slices.Equal(got, want) {
			b.Fatalf("the helpdesk holds %v of %s; want %v", got, th.ticket, want)
		}
		at := func(id string) time.Time {
			d, ok := timed.DeliveredAt(id)
			if !ok {
				b.Fatalf("%s: no delivered record", id)
			}
			return d
		}
		delivered := at(th.ticket)
		for _, c := range []time.Time{th.commented, th.closed} {
			if c.After(delivered) {
				late++
			}
		}
		ticketLat = append(ticketLat, delivered.Sub(th.created))
		commentLat = append(commentLat, at(th.comment).Sub(delivered))
		closeLat = append(closeLat, at(th.close).Sub(delivered))
	}
	calls := 0
	for _, k := range []fakehelpdesk.Kind{fakehelpdesk.ZendeskCreate, fakehelpdesk.ZendeskLookup, fakehelpdesk.ZendeskUpdate,
		fakehelpdesk.ZendeskShow, fakehelpdesk.ZendeskAudits} {
		calls += r.fake.Requests(k)
	}
	benchtest.ReportLatency(b, "comment-", commentLat)
	benchtest.ReportLatency(b, "close-", closeLat)
	benchtest.ReportLatency(b, "ticket-", ticketLat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "threads/s")
	b.ReportMetric(float64(calls)/float64(3*b.N), "helpdesk-calls/record")
	b.ReportMetric(float64(late), "late-followups")
}

// followUp makes one call of fn (add_comment or close_ticket) with the
// arguments args under requestID, again with the same request id while
// the answer is busy or in progress, as createTicket does; it panics on
// any answer but created or deduplicated (a retry whose first call had
// committed).
func followUp(ctx context.Context, svc *core.Service, fn string, args map[string]string, requestID string) core.Outcome {
	content, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	for range 50 {
		out := svc.Answer(ctx, core.Call{Function: fn, Content: content, ExternalUserID: deliverytest.User, RequestID: requestID})
		switch out.Kind {
		case core.KindCreated, core.KindDuplicate:
			return out
		case core.KindBusy, core.KindInProgress:
			time.Sleep(100 * time.Millisecond)
			continue
		}
		panic(fmt.Sprintf("%s: %v %s %v", fn, out.Kind, out.Code, out.Err))
	}
	panic(fn + ": still busy after 50 tries")
}

// decode reads an answer's body into v.
func decode(b *testing.B, out core.Outcome, v any) {
	b.Helper()
	if err := json.Unmarshal(out.Body, v); err != nil {
		b.Fatalf("answer %s: %v", out.Body, err)
	}
}
