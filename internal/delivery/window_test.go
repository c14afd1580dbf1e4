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
