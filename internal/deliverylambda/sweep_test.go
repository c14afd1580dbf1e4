package deliverylambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/jsonlines"
)

const scheduled = `{"detail-type":"Scheduled Event","source":"aws.events"}`

// failingDue makes the sweep's query for due tickets fail, as a table
// without the delivery-due index answers (ValidationException).
type failingDue struct{ delivery.Outbox }

func (failingDue) Due(context.Context, time.Time, int) ([]string, error) {
	return nil, errors.New("ValidationException: The table does not have the specified index: " + dynamo.DeliveryDueIndex)
}

// TestSweepQueryFailsIsAnError: a sweep that cannot query its due tickets
// fails the invocation (so Lambda's Errors metric and its alarm see it)
// and logs the cause at ERROR; it does not answer {"moved":0}.
func TestSweepQueryFailsIsAnError(t *testing.T) {
	f := newFixture(t, func(s delivery.Outbox) delivery.Outbox { return failingDue{s} })
	f.env.Now = time.Now()
	f.env.Create(`{"title":"Never found"}`)
	out, err := f.h.Handle(context.Background(), json.RawMessage(scheduled))
	if err == nil || !strings.Contains(err.Error(), dynamo.DeliveryDueIndex) {
		t.Fatalf("Handle answered %#v, %v; want an error naming the query's cause", out, err)
	}
	var line map[string]any
	for _, l := range jsonlines.Decode(t, f.logs.String()) {
		if l["msg"] == "delivery sweep" {
			line = l
		}
	}
	if line == nil || line["level"] != "ERROR" || !strings.Contains(line["error"].(string), "find due tickets") {
		t.Fatalf("sweep line %v, want level ERROR with the error\n%s", line, f.logs)
	}
	if f.fake.Total() != 0 {
		t.Fatalf("helpdesk holds %d", f.fake.Total())
	}
}

// gateDest counts the sends in flight: each waits until n are in flight
// at once (or, as a safety net only, ten seconds), and the gate then stays
// shut a moment longer, so a sweep bounded at n reaches exactly n while
// one that is not bounded has the time to start more and pass it. The
// moment only gives a broken sweep its chance; a bounded one passes
// however long it is.
type gateDest struct {
	n        int
	mu       sync.Mutex
	inflight int
	max      int
	sends    int
	open     chan struct{}
	once     sync.Once
}

func newGate(n int) *gateDest { return &gateDest{n: n, open: make(chan struct{})} }

func (g *gateDest) Send(ctx context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	g.mu.Lock()
	g.inflight++
	g.sends++
	g.max = max(g.max, g.inflight)
	if g.inflight >= g.n {
		g.once.Do(func() { time.AfterFunc(200*time.Millisecond, func() { close(g.open) }) })
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.inflight--
	g.mu.Unlock()
	return delivery.Receipt{ExternalID: "x-" + t.ID}, nil
}

func (g *gateDest) Lookup(context.Context, string) (delivery.Receipt, bool, error) {
	return delivery.Receipt{}, false, delivery.ErrNoLookup
}

// TestSweepConcurrencyBound: a sweep over 40 due tickets with
// SweepConcurrency 6 has exactly 6 sends in flight at its busiest, never
// more, and delivers all 40 in one invocation (it claims the next ticket
// as a slot frees up instead of stopping after a round).
func TestSweepConcurrencyBound(t *testing.T) {
	f, _ := tableFixture(t)
	f.env.Now = time.Now()
	const tickets, bound = 40, 6
	for range tickets {
		f.env.Create(`{"title":"Backlog"}`)
	}
	gate := newGate(bound)
	h := deliverylambda.Options{Store: f.store, Destination: gate, Log: slog.New(slog.DiscardHandler),
		Metrics: deliverylambda.NewRecorder(), SweepConcurrency: bound}.Handler()
	res, err := h.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if gate.max != bound || gate.sends != tickets || res.Moved != tickets {
		t.Fatalf("at most %d sends in flight, %d sends, moved %d; want exactly %d in flight, %d sends and moved",
			gate.max, gate.sends, res.Moved, bound, tickets)
	}
}

// TestSweepStopsClaimingBeforeTheDeadline: with less than one lease plus
// one call timeout left before the invocation's deadline, the sweep
// claims nothing (a claim it could not finish would leave the ticket to a
// lease takeover and a lookup); with more left, it delivers.
func TestSweepStopsClaimingBeforeTheDeadline(t *testing.T) {
	f, _ := tableFixture(t)
	f.env.Now = time.Now()
	id := f.env.Create(`{"title":"Late"}`)
	gate := newGate(1)
	lease, timeout := 4*time.Second, 2*time.Second
	h := deliverylambda.New(delivery.Engine{Lease: lease, CallTimeout: timeout}, f.store, gate, slog.New(slog.DiscardHandler))

	ctx, cancel := context.WithTimeout(context.Background(), lease+timeout-time.Second)
	res, err := h.Sweep(ctx)
	cancel()
	if err != nil || res.Moved != 0 || gate.sends != 0 {
		t.Fatalf("short deadline: moved %d, %d sends, %v; want nothing claimed", res.Moved, gate.sends, err)
	}
	if r := f.env.Record(id); r.State != delivery.StatePending {
		t.Fatalf("ticket %s after a sweep without time: %s, want pending", id, r.State)
	}
	ctx, cancel = context.WithTimeout(context.Background(), lease+timeout+time.Minute)
	defer cancel()
	if res, err := h.Sweep(ctx); err != nil || res.Moved != 1 || gate.sends != 1 {
		t.Fatalf("long deadline: moved %d, %d sends, %v; want the ticket delivered", res.Moved, gate.sends, err)
	}
}

// TestTwoSweepsAtOnce: two delivery functions sweeping the same table at
// the same time (a sweep that outlives the schedule's minute overlaps the
// next) send each ticket to the helpdesk exactly once: the claims' leases
// keep them apart. Counted on the fake helpdesk's creates.
func TestTwoSweepsAtOnce(t *testing.T) {
	f, _ := tableFixture(t)
	f.env.Now = time.Now()
	fake := fakehelpdesk.New(t, fakehelpdesk.Config{})
	// A slow create keeps both sweeps busy at once.
	fake.Script(fakehelpdesk.Rule{Kind: fakehelpdesk.ZendeskCreate, Times: 1 << 30, Fault: fakehelpdesk.Fault{Delay: 30 * time.Millisecond}})
	const tickets = 60
	ids := make([]string, tickets)
	for i := range ids {
		ids[i] = f.env.Create(`{"title":"Both sweeps see me"}`)
	}
	var handlers [2]*deliverylambda.Handler
	for i := range handlers {
		handlers[i] = deliverylambda.Options{Store: f.store, Destination: zendeskFor(t, fake),
			Log: slog.New(slog.DiscardHandler), Metrics: deliverylambda.NewRecorder(), SweepConcurrency: 8}.Handler()
	}
	var wg sync.WaitGroup
	var moved [2]int
	var errs [2]error
	start := make(chan struct{})
	for i, h := range handlers {
		wg.Go(func() {
			<-start
			var res deliverylambda.SweepResult
			res, errs[i] = h.Sweep(context.Background())
			moved[i] = res.Moved
		})
	}
	close(start)
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if creates := fake.Requests(fakehelpdesk.ZendeskCreate); creates != tickets || fake.Total() != tickets {
		t.Fatalf("%d creates, helpdesk holds %d; want %d each", creates, fake.Total(), tickets)
	}
	for _, id := range ids {
		if fake.Held(id) != 1 || f.env.Record(id).State != delivery.StateDelivered {
			t.Fatalf("ticket %s: held %d, %s", id, fake.Held(id), f.env.Record(id).State)
		}
	}
	if moved[0]+moved[1] != tickets {
		t.Fatalf("moved %v, want %d in all", moved, tickets)
	}
	t.Logf("moved by each sweep: %v", moved)
}
