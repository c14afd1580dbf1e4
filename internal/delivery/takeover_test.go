package delivery_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// A worker whose lease ran out may have sent as late as the lease's end.
// Where the destination cannot be looked up, the worker that takes the
// ticket over does not resend before that send's outcome window has
// closed, counted from the lease's end: the helpdesk may still be
// committing it, and a receiver that does not answer 409 meanwhile would
// create a second ticket. The resend after the window carries the same
// key.
func TestTakeoverWithoutLookupWaitsForTheWindow(t *testing.T) {
	for _, callTimeout := range []time.Duration{100 * time.Millisecond, 0} {
		f := newFixture(t, &script{sends: []error{created}, lookups: []lookupAnswer{noLookup}})
		f.eng.CallTimeout = callTimeout
		f.eng.Lease = delivery.LeaseFor(callTimeout)
		id := f.ticket()
		ctx := context.Background()
		// Worker A claims, sends late in its lease and dies before
		// recording.
		lease := delivery.CeilSecond(f.now.Add(f.eng.Lease))
		if _, err := f.store.Claim(ctx, id, "dead-worker", f.now, lease); err != nil {
			t.Fatal(err)
		}
		// Worker B claims one second after the lease's end.
		f.now = lease.Add(time.Second)
		if st := f.deliver(id); st != delivery.StatePending {
			t.Fatalf("timeout %v: after the takeover: %s, want pending", callTimeout, st)
		}
		end := delivery.CeilSecond(lease.Add(delivery.OutcomeWindow(callTimeout)))
		r := f.record(id)
		if sends, _ := f.dest.counts(); sends != 0 || !r.SentUnknown || r.Attempts != 1 || !r.DueAt.Equal(end) {
			t.Fatalf("timeout %v: after the takeover: %+v, %d sends; want no send, the lapsed one counted, due at the window's end %v",
				callTimeout, r, sends, end)
		}
		f.now = r.DueAt
		if st := f.deliver(id); st != delivery.StateDelivered {
			t.Fatalf("timeout %v: at the window's end: %s, want delivered", callTimeout, st)
		}
		if sends, _ := f.dest.counts(); sends != 1 || f.record(id).Attempts != 2 {
			t.Fatalf("timeout %v: %d sends, record %+v; want one resend, two attempts", callTimeout, sends, f.record(id))
		}
	}
}

// forbidden is a lookup refused our credentials: a token that may create
// tickets but not list them.
var forbidden = lookupAnswer{err: &delivery.SendError{Failure: delivery.Misconfigured, Status: 403, Err: errors.New("forbidden")}}

// A lookup refused (401 or 403) is a failed lookup of that ticket: it backs
// off, counts against the lookup limit, is counted misconfigured, and the
// ticket ends unknown when the lookups run out; other tickets are sent
// meanwhile (no pause).
func TestRefusedLookupsEndUnknown(t *testing.T) {
	f := newFixture(t, &script{sends: []error{timeout, created}, lookups: []lookupAnswer{forbidden}})
	f.eng.MaxLookups = 3
	obs := &steps{}
	f.eng.Observer = obs
	id := f.ticket()
	f.deliver(id) // times out: may be in the helpdesk
	for n := 1; n <= 2; n++ {
		f.now = f.record(id).DueAt
		if st := f.deliver(id); st != delivery.StatePending {
			t.Fatalf("after refused lookup %d: %s, want pending", n, st)
		}
		r := f.record(id)
		if want := delivery.CeilSecond(f.now.Add(delivery.DefaultBackoffBase << (n - 1))); r.LookupFailures != n || !r.DueAt.Equal(want) {
			t.Fatalf("after refused lookup %d: %+v; want %d failed lookups, due %v", n, r, n, want)
		}
		if s := obs.list(); s[len(s)-1].Result != delivery.ResultMisconfigured {
			t.Fatalf("refused lookup %d counted %s, want %s", n, s[len(s)-1].Result, delivery.ResultMisconfigured)
		}
		// Another ticket is sent at once: a refused lookup pauses nothing.
		if st := f.deliver(f.ticket()); st != delivery.StateDelivered {
			t.Fatalf("another ticket after refused lookup %d: %s, want delivered", n, st)
		}
	}
	r := f.untilFinal(id)
	sends, lookups := f.dest.counts()
	if r.State != delivery.StateUnknown || r.LookupFailures != 3 || lookups != 3 || sends != 3 ||
		!strings.Contains(r.Error, "lookups ran out") || !strings.Contains(r.Error, "403") {
		t.Fatalf("%+v after %d sends, %d lookups; want unknown after 3 refused lookups, saying so", r, sends, lookups)
	}
	if last := obs.list()[len(obs.list())-1]; last.Result != delivery.ResultUnknown {
		t.Fatalf("last step counted %s, want unknown", last.Result)
	}
}

// A refused lookup followed by a found one: delivered, no resend.
func TestRefusedLookupThenFoundIsDelivered(t *testing.T) {
	f := newFixture(t, &script{sends: []error{timeout}, lookups: []lookupAnswer{forbidden, found}})
	f.eng.MaxLookups = 2
	r, sends, lookups := f.newTicketToFinal()
	if r.State != delivery.StateDelivered || sends != 1 || lookups != 2 {
		t.Fatalf("%+v after %d sends, %d lookups; want delivered by the second lookup", r, sends, lookups)
	}
}

// The refusal of lookups is logged once per change from answered to
// refused: sends the destination accepts meanwhile do not end it (so it is
// not logged again each cycle); a lookup it answers does, and a later
// refusal is logged again.
func TestLookupRefusalLoggedOncePerChange(t *testing.T) {
	f := newFixture(t, &script{sends: []error{timeout, timeout, timeout, created}, lookups: []lookupAnswer{forbidden}})
	var logs bytes.Buffer
	f.eng.Log = slog.New(slog.NewTextHandler(&logs, nil))
	f.eng.MaxLookups = 6
	a, b, c := f.ticket(), f.ticket(), f.ticket()
	f.deliver(a)
	f.deliver(b)
	f.deliver(c) // three sends time out: each needs a lookup
	f.dest.sends = []error{created}
	f.dest.nSend = 0
	for range 4 {
		f.now = later(f.record(a).DueAt, f.record(b).DueAt)
		f.deliver(a)
		f.deliver(b)
		f.deliver(f.ticket()) // accepted: a working send
	}
	refusals := func() int { return strings.Count(logs.String(), "refused our credentials or URL") }
	if n := refusals(); n != 1 || strings.Contains(logs.String(), "answers our lookups again") {
		t.Fatalf("logged the lookup refusal %d times over 8 refused lookups and 4 accepted sends, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "call=lookup") {
		t.Fatalf("the line does not say lookups were refused:\n%s", logs.String())
	}
	f.dest.lookups, f.dest.nLookup = []lookupAnswer{found}, 0
	f.now = f.record(c).DueAt
	f.deliver(c)
	if !strings.Contains(logs.String(), "answers our lookups again") {
		t.Fatalf("no line when lookups were answered again:\n%s", logs.String())
	}
	f.dest.lookups, f.dest.nLookup = []lookupAnswer{forbidden}, 0
	f.now = f.record(a).DueAt
	f.deliver(a)
	if n := refusals(); n != 2 {
		t.Fatalf("logged %d refusals after a second change to refused, want 2:\n%s", n, logs.String())
	}
}

// Check says in one line whether lookups work, and is not ok when they are
// refused or fail.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		answer lookupAnswer
		ok     bool
		says   string
	}{
		{absent, true, "lookups work"},
		{found, true, "lookups work"},
		{noLookup, true, "cannot be looked up"},
		{forbidden, false, "REFUSED: the helpdesk refused a lookup (HTTP 403)"},
		{lookupErr, false, "the lookup failed: lookup timed out"},
	} {
		d := &script{lookups: []lookupAnswer{c.answer}}
		line, ok := delivery.Check(context.Background(), d)
		if ok != c.ok || !strings.Contains(line, c.says) || strings.Contains(line, "\n") {
			t.Errorf("lookup %+v: %q, %t; want one line saying %q, %t", c.answer, line, ok, c.says, c.ok)
		}
	}
}

// The clock assumption: a holder whose clock runs behind the taker's by
// less than the lease margin started its last send, by the taker's clock,
// before its lease's end (its calls are cut off the margin before the end
// by its own clock), so the window the taker counts from the lease's end
// covers that send. Checked at the shortest timeout, where the margin is
// half the 3.2 s lease.
func TestTakeoverCoversAHolderWhoseClockRunsBehind(t *testing.T) {
	timeout := 100 * time.Millisecond
	lease := delivery.LeaseFor(timeout)
	margin := lease / 2
	for _, skew := range []time.Duration{0, time.Second, margin - time.Millisecond} {
		f := newFixture(t, &script{sends: []error{created}, lookups: []lookupAnswer{noLookup}})
		f.eng.CallTimeout, f.eng.Lease = timeout, lease
		id := f.ticket()
		ctx := context.Background()
		// The holder claims by its clock, which runs skew behind the
		// taker's (f.now from here on).
		until := delivery.CeilSecond(f.now.Add(lease))
		if _, err := f.store.Claim(ctx, id, "dead-worker", f.now, until); err != nil {
			t.Fatal(err)
		}
		// Its latest send starts at its calls' deadline by its clock: on
		// the taker's clock, skew later.
		latestStart := until.Add(-margin).Add(skew)
		f.now = until.Add(time.Second) // the first whole second the lease has run out
		f.deliver(id)
		r := f.record(id)
		if sends, _ := f.dest.counts(); sends != 0 || r.DueAt.Before(latestStart.Add(delivery.OutcomeWindow(timeout))) {
			t.Fatalf("skew %v: after the takeover %+v, %d sends; want no send before %v, the window of a send started at %v",
				skew, r, sends, latestStart.Add(delivery.OutcomeWindow(timeout)), latestStart)
		}
	}
}
