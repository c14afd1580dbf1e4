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

// timeout is a send the client gave up on: its outcome is unknown.
var timeout = &delivery.SendError{Failure: delivery.Unknown, Err: context.DeadlineExceeded}

// makeDue records ticket id pending and due at due, keeping the rest of its
// record: how a ticket comes to be claimed before its send's outcome
// window has closed (a takeover, an operator, a runner of an older rule).
func (f *fixture) makeDue(id string, due time.Time) {
	f.t.Helper()
	r := f.record(id)
	ctx := context.Background()
	if _, err := f.store.Claim(ctx, id, "test", r.DueAt, r.DueAt.Add(time.Minute)); err != nil {
		f.t.Fatal(err)
	}
	u := r.Update
	u.State, u.DueAt = delivery.StatePending, due
	if err := f.store.Record(ctx, id, "test", u); err != nil {
		f.t.Fatal(err)
	}
}

// A send that timed out, then a lookup inside its window that answers
// absent: not yet known. The ticket waits for the window's end, no send is
// made or counted, and it stays "may be in the helpdesk".
func TestAbsentInsideTheWindowIsNotYetKnown(t *testing.T) {
	f := newFixture(t, &script{sends: []error{timeout, created}, lookups: []lookupAnswer{absent}})
	id := f.ticket()
	sentAt := f.now
	if st := f.deliver(id); st != delivery.StatePending {
		t.Fatalf("after the timeout: %s", st)
	}
	end := sentAt.Add(delivery.OutcomeWindow(0))
	r := f.record(id)
	if !r.SentUnknown || !r.SentAt.Equal(sentAt) || r.DueAt.Before(end) {
		t.Fatalf("after the timeout: %+v; want sent at %v, due no earlier than %v", r, sentAt, end)
	}
	f.makeDue(id, f.now.Add(2*time.Second).Truncate(time.Second))
	f.now = f.now.Add(2 * time.Second)
	if st := f.deliver(id); st != delivery.StatePending {
		t.Fatalf("after an early absent: %s, want pending", st)
	}
	r = f.record(id)
	sends, lookups := f.dest.counts()
	if sends != 1 || lookups != 1 || r.Attempts != 1 || !r.SentUnknown || !r.DueAt.Equal(delivery.CeilSecond(end)) {
		t.Fatalf("after an early absent: %+v, %d sends, %d lookups; want 1 send, may be in the helpdesk, due %v", r, sends, lookups, end)
	}
}

// Once the window has closed, absent rules the send out: resent, with the
// same key. The resend is never due before the window's end, however
// short the backoff.
func TestAbsentAfterTheWindowResends(t *testing.T) {
	for _, callTimeout := range []time.Duration{0, 300 * time.Millisecond, 30 * time.Second} {
		f := newFixture(t, &script{sends: []error{timeout, created}, lookups: []lookupAnswer{absent}})
		f.eng.CallTimeout = callTimeout
		id := f.ticket()
		sentAt := f.now
		f.deliver(id)
		// The window: the timeout plus max(timeout, 5 s); 10 s when unset.
		want := map[time.Duration]time.Duration{0: 20 * time.Second, 300 * time.Millisecond: 5300 * time.Millisecond, 30 * time.Second: time.Minute}[callTimeout]
		if got := delivery.OutcomeWindow(callTimeout); got != want {
			t.Fatalf("OutcomeWindow(%v) = %v, want %v", callTimeout, got, want)
		}
		r := f.record(id)
		if !r.DueAt.Equal(delivery.CeilSecond(sentAt.Add(want))) {
			t.Fatalf("timeout %v: due %v, want the window's end %v", callTimeout, r.DueAt, sentAt.Add(want))
		}
		f.now = r.DueAt
		if st := f.deliver(id); st != delivery.StateDelivered {
			t.Fatalf("timeout %v: %s, want delivered", callTimeout, st)
		}
		if sends, lookups := f.dest.counts(); sends != 2 || lookups != 1 || f.dest.keys[1] != id {
			t.Fatalf("timeout %v: %d sends, %d lookups, keys %v", callTimeout, sends, lookups, f.dest.keys)
		}
	}
}

// The last attempt timed out: no lookup right after it (it could not rule
// the send out); the ticket is not failed, and a lookup once the window
// has closed decides.
func TestLastAttemptTimedOutIsNotFailedOnAnEarlyAbsent(t *testing.T) {
	for _, c := range []struct {
		answer lookupAnswer
		want   delivery.State
	}{{absent, delivery.StateFailed}, {found, delivery.StateDelivered}, {noLookup, delivery.StateUnknown}} {
		f := newFixture(t, &script{sends: []error{timeout}, lookups: []lookupAnswer{absent, c.answer}})
		f.eng.MaxAttempts = 1
		id := f.ticket()
		sentAt := f.now
		if st := f.deliver(id); st != delivery.StatePending {
			t.Fatalf("after the last send timed out: %s, want pending", st)
		}
		// Even claimed early, an absent does not end it.
		f.makeDue(id, f.now.Add(time.Second).Truncate(time.Second))
		f.now = f.now.Add(time.Second)
		if st := f.deliver(id); st != delivery.StatePending {
			t.Fatalf("after an early absent: %s, want pending", st)
		}
		r := f.untilFinal(id)
		sends, lookups := f.dest.counts()
		if r.State != c.want || sends != 1 || lookups != 2 || f.now.Before(sentAt.Add(delivery.OutcomeWindow(0))) {
			t.Fatalf("ended %s (%s) at %v after %d sends, %d lookups; want %s, decided after the window", r.State, r.Error, f.now, sends, lookups, c.want)
		}
		if c.want == delivery.StateFailed && !strings.Contains(r.Error, "sends ran out (1 sends") {
			t.Fatalf("error %q does not say the sends ran out", r.Error)
		}
	}
}

// A resend refused (4xx) after a send that may have created the ticket:
// unknown, never failed.
func TestRefusedAfterAnUnknownSendIsUnknown(t *testing.T) {
	for _, answer := range []lookupAnswer{noLookup, absent} {
		f := newFixture(t, &script{sends: []error{timeout, timeout, refused}, lookups: []lookupAnswer{answer}})
		id := f.ticket()
		if answer == absent {
			// The second send's window is cut short by a takeover, so the
			// lookup before the third cannot rule it out.
			f.deliver(id)
			f.now = f.record(id).DueAt
			f.deliver(id) // absent past the first window: resent, timed out again
			f.makeDue(id, f.now.Add(time.Second).Truncate(time.Second))
			f.dest.lookups = []lookupAnswer{noLookup}
		}
		r := f.untilFinal(id)
		if r.State != delivery.StateUnknown || !strings.Contains(r.Error, "refused") || !r.SentUnknown {
			t.Fatalf("lookup %+v: %+v; want unknown, saying it was refused", answer, r)
		}
	}
}

// A lookup answered 429 with Retry-After: the ticket is not due before it.
// Failed lookups back off on their own count, with jitter.
func TestFailedLookupsBackOffAndHonourRetryAfter(t *testing.T) {
	limited := lookupAnswer{err: &delivery.SendError{Failure: delivery.Unknown, Status: 429, RetryAfter: 90 * time.Second, Err: errors.New("too many requests")}}
	f := newFixture(t, &script{sends: []error{timeout, created}, lookups: []lookupAnswer{limited, lookupErr, lookupErr, lookupErr, found}})
	id := f.ticket()
	f.deliver(id)
	f.now = f.record(id).DueAt
	f.deliver(id)
	if r := f.record(id); r.LookupFailures != 1 || r.DueAt.Before(f.now.Add(90*time.Second)) {
		t.Fatalf("after a 429 lookup: %+v; want due no earlier than %v", r, f.now.Add(90*time.Second))
	}
	// The jitter takes the longest delay: base·2^(n-1) after the n-th
	// failed lookup.
	for n := 2; n <= 4; n++ {
		f.now = f.record(id).DueAt
		f.deliver(id)
		r := f.record(id)
		if want := delivery.DefaultBackoffBase << (n - 1); r.LookupFailures != n || !r.DueAt.Equal(delivery.CeilSecond(f.now.Add(want))) {
			t.Fatalf("after failed lookup %d: %+v; want due %v later", n, r, want)
		}
	}
	r := f.untilFinal(id)
	if sends, lookups := f.dest.counts(); r.State != delivery.StateDelivered || sends != 1 || lookups != 5 {
		t.Fatalf("%+v after %d sends, %d lookups", r, sends, lookups)
	}
}

// Lookups that keep failing end the ticket unknown, and the error says it
// was the lookups that ran out, with the counts.
func TestLookupsExhaustedEndUnknown(t *testing.T) {
	f := newFixture(t, &script{sends: []error{timeout}, lookups: []lookupAnswer{lookupErr}})
	f.eng.MaxAttempts = 3
	r, sends, lookups := f.newTicketToFinal()
	if r.State != delivery.StateUnknown || sends != 1 || lookups != 3 ||
		!strings.Contains(r.Error, "lookups ran out (3 failed lookups, 1 sends)") {
		t.Fatalf("%+v after %d sends, %d lookups", r, sends, lookups)
	}
	f = newFixture(t, &script{sends: []error{timeout}, lookups: []lookupAnswer{lookupErr}})
	f.eng.MaxAttempts, f.eng.MaxLookups = 3, 5
	if r := f.untilFinal(f.ticket()); r.LookupFailures != 5 || r.State != delivery.StateUnknown {
		t.Fatalf("MaxLookups 5: %+v", r)
	}
}

// 401 on a send: the ticket stays pending, no send counted, nothing taken
// as "may be in the helpdesk"; delivery to the destination pauses (the
// next ticket is not sent), the refusal is logged once, and delivery
// resumes when the destination accepts us again.
func TestMisconfiguredPausesTheDestination(t *testing.T) {
	f := newFixture(t, &script{sends: []error{misconfigured, misconfigured, created}})
	var logs bytes.Buffer
	f.eng.Log = slog.New(slog.NewTextHandler(&logs, nil))
	obs := &steps{}
	f.eng.Observer = obs
	a, b := f.ticket(), f.ticket()
	if st := f.deliver(a); st != delivery.StatePending {
		t.Fatalf("after a 401: %s, want pending", st)
	}
	ra := f.record(a)
	pause := ra.DueAt.Sub(f.now)
	if ra.Attempts != 0 || ra.SentUnknown || pause <= 0 || pause > delivery.MaxPause || !strings.Contains(ra.Error, "401") {
		t.Fatalf("after a 401: %+v", ra)
	}
	if st := f.deliver(b); st != delivery.StatePending {
		t.Fatalf("second ticket while paused: %s, want pending", st)
	}
	if sends, _ := f.dest.counts(); sends != 1 {
		t.Fatalf("%d sends while paused, want 1", sends)
	}
	if rb := f.record(b); rb.Attempts != 0 || !rb.DueAt.Equal(ra.DueAt) || !strings.Contains(rb.Error, "refused our credentials") {
		t.Fatalf("second ticket: %+v, want held until %v", rb, ra.DueAt)
	}
	// Refused again once the pause is over: a longer pause, no new log line.
	f.now = ra.DueAt
	f.deliver(a)
	if again := f.record(a).DueAt.Sub(f.now); again <= pause {
		t.Fatalf("second pause %v, want longer than %v", again, pause)
	}
	if n := strings.Count(logs.String(), "delivery destination refused our credentials or URL"); n != 1 {
		t.Fatalf("logged the refusal %d times, want once:\n%s", n, logs.String())
	}
	f.now = f.record(a).DueAt
	if f.deliver(a) != delivery.StateDelivered || f.deliver(b) != delivery.StateDelivered {
		t.Fatalf("after the destination accepts us: %+v, %+v", f.record(a), f.record(b))
	}
	if r := f.record(a); r.Attempts != 1 {
		t.Fatalf("attempts %d, want 1: refusals of our credentials are not sends", r.Attempts)
	}
	if !strings.Contains(logs.String(), "accepts our credentials again") {
		t.Fatalf("no line when delivery resumed:\n%s", logs.String())
	}
	var results []delivery.Result
	for _, s := range obs.list() {
		results = append(results, s.Result)
	}
	want := []delivery.Result{delivery.ResultMisconfigured, delivery.ResultMisconfigured, delivery.ResultMisconfigured,
		delivery.ResultDelivered, delivery.ResultDelivered}
	if len(results) != len(want) {
		t.Fatalf("results %v, want %v", results, want)
	}
	for i := range want {
		if results[i] != want[i] {
			t.Fatalf("results %v, want %v", results, want)
		}
	}
}

// The operator's retry of a ticket that may be in the helpdesk looks it up
// first: found is delivered with no send; absent inside the window waits;
// absent past it resends. Resolve-resend keeps the same rule.
func TestRetryOfATicketThatMayBeInTheHelpdeskLooksUpFirst(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		answer lookupAnswer
		resend func(context.Context, delivery.Admin, string, time.Time) error
		from   delivery.State
		sends  int
		want   delivery.State
	}{
		{"retry, found", found, delivery.Retry, delivery.StateFailed, 0, delivery.StateDelivered},
		{"retry, absent past the window", absent, delivery.Retry, delivery.StateFailed, 1, delivery.StateDelivered},
		{"resolve-resend, found", found, delivery.ResolveResend, delivery.StateUnknown, 0, delivery.StateDelivered},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, &script{sends: []error{created}, lookups: []lookupAnswer{c.answer}})
			id := f.ticket()
			sentAt := f.now
			// A final record that says a send may have created it.
			if _, err := f.store.Claim(ctx, id, "w", f.now, f.now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := f.store.Record(ctx, id, "w", delivery.Update{State: c.from, Attempts: 8, LookupFailures: 2,
				SentUnknown: true, SentAt: sentAt, Error: "x"}); err != nil {
				t.Fatal(err)
			}
			f.now = f.now.Add(3 * time.Hour)
			if err := c.resend(ctx, f.store, id, f.now); err != nil {
				t.Fatal(err)
			}
			r := f.record(id)
			if r.State != delivery.StatePending || r.Attempts != 0 || r.LookupFailures != 0 || !r.SentUnknown || !r.SentAt.Equal(sentAt) {
				t.Fatalf("after %s: %+v", c.name, r)
			}
			if st := f.deliver(id); st != c.want {
				t.Fatalf("%s", st)
			}
			if sends, lookups := f.dest.counts(); sends != c.sends || lookups != 1 {
				t.Fatalf("%d sends, %d lookups; want %d, 1", sends, lookups, c.sends)
			}
		})
	}
	// Inside the window neither an absent nor a destination that cannot
	// be looked up rules the send out: the ticket waits, no resend.
	for _, c := range []struct {
		name   string
		answer lookupAnswer
	}{{"absent", absent}, {"no lookup", noLookup}} {
		t.Run("retry inside the window: "+c.name+" waits", func(t *testing.T) {
			f := newFixture(t, &script{sends: []error{created}, lookups: []lookupAnswer{c.answer}})
			id := f.ticket()
			sentAt := f.now
			if _, err := f.store.Claim(ctx, id, "w", f.now, f.now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := f.store.Record(ctx, id, "w", delivery.Update{State: delivery.StateFailed, Attempts: 8,
				SentUnknown: true, SentAt: sentAt, Error: "x"}); err != nil {
				t.Fatal(err)
			}
			f.now = f.now.Add(2 * time.Second)
			if err := delivery.Retry(ctx, f.store, id, f.now); err != nil {
				t.Fatal(err)
			}
			if st := f.deliver(id); st != delivery.StatePending {
				t.Fatalf("%s, want pending", st)
			}
			if sends, _ := f.dest.counts(); sends != 0 {
				t.Fatalf("%d sends inside the window", sends)
			}
		})
	}
}

// A record with SentUnknown and no SentAt: the window counts from the
// claim, so an absent answered at once does not rule the send out.
func TestMaybeDeliveredWithoutASendStartWaitsAWindow(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}, lookups: []lookupAnswer{absent}})
	id := f.ticket()
	ctx := context.Background()
	due := f.now.Truncate(time.Second)
	if _, err := f.store.Claim(ctx, id, "old-worker", due, due.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Record(ctx, id, "old-worker", delivery.Update{State: delivery.StatePending, Attempts: 1,
		SentUnknown: true, DueAt: due}); err != nil {
		t.Fatal(err)
	}
	claimedAt := f.now
	if st := f.deliver(id); st != delivery.StatePending {
		t.Fatalf("after an absent at once: %s, want pending", st)
	}
	r := f.record(id)
	sends, lookups := f.dest.counts()
	if !r.SentUnknown || sends != 0 || lookups != 1 || r.DueAt.Before(claimedAt.Add(delivery.OutcomeWindow(0))) {
		t.Fatalf("%+v after %d sends, %d lookups; want still may be in the helpdesk, no send, due after a whole window", r, sends, lookups)
	}
}

// A ticket whose worker died holding it (its send may have been made) and
// whose arguments cannot be read ends unknown, not failed: a retry after
// the data is repaired must look it up first.
func TestUnreadableAfterALapsedLeaseIsUnknown(t *testing.T) {
	f := newFixture(t, &script{sends: []error{created}})
	id := "ticket-unreadable"
	f.ticketWith(id, `not json`)
	lease := f.now.Truncate(time.Second).Add(30 * time.Second)
	if _, err := f.store.Claim(context.Background(), id, "dead-worker", f.now, lease); !errors.Is(err, delivery.ErrUnreadable) {
		t.Fatalf("claim by the worker that dies: %v", err)
	}
	f.now = lease.Add(2 * time.Second)
	if st := f.deliver(id); st != delivery.StateUnknown {
		t.Fatalf("after the takeover: %s, want unknown", st)
	}
	if r := f.record(id); !r.SentUnknown || r.Attempts != 1 {
		t.Fatalf("%+v, want the lapsed lease counted as a send that may have created it", r)
	}
}

// A lookup the destination answers does not end a pause: a token that may
// read but not create keeps the destination paused, the pause grows, and
// the refusal is logged once.
func TestLookupsDoNotEndAPause(t *testing.T) {
	f := newFixture(t, &script{sends: []error{timeout, misconfigured}, lookups: []lookupAnswer{absent}})
	var logs bytes.Buffer
	f.eng.Log = slog.New(slog.NewTextHandler(&logs, nil))
	a := f.ticket()
	f.deliver(a) // times out: may be in the helpdesk
	b := f.ticket()
	f.deliver(b) // 401: paused
	first := f.record(b).DueAt.Sub(f.now)
	f.now = later(f.record(a).DueAt, f.record(b).DueAt)
	f.deliver(a) // absent past the window, then the resend is refused our credentials
	if got := f.record(a).DueAt.Sub(f.now); got <= first {
		t.Fatalf("pause after a lookup and a refused send %v, want longer than the first %v", got, first)
	}
	if strings.Contains(logs.String(), "accepts our credentials again") ||
		strings.Count(logs.String(), "refused our credentials or URL") != 1 {
		t.Fatalf("want the refusal logged once and no recovery:\n%s", logs.String())
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

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
