// Package matrixtest is the delivery failure matrix: the real engine over a
// real store, through the real Zendesk and webhook adapters, against the
// fake helpdesk under each failure mode it scripts. Each store's tests run
// it; tickets are created through the conformance suite's Env.
package matrixtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/bench/results"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/linear"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/fakehelpdesk"
)

// Matrix settings: a short client timeout, so "slow past the timeout"
// costs little, and few attempts, so outages end quickly.
const (
	matrixTimeout     = 300 * time.Millisecond
	matrixMaxAttempts = 4
)

// The destinations the matrix runs against the fake helpdesk.
const (
	destZendesk  = "zendesk"
	destWebhook  = "webhook"           // with lookup
	destNoLookup = "webhook-no-lookup" // the endpoint cannot be queried
	destLinear   = "linear"            // creates keyed by the ticket id
)

var matrixDests = []string{destZendesk, destWebhook, destNoLookup, destLinear}

// expect is a failure mode's outcome for one destination.
type expect struct {
	state   delivery.State
	held    int // tickets the fake holds under the ticket id
	creates int // create requests sent
	// refused is how many of the creates the fake refused as
	// unauthorized: not sends, so not counted in the record's attempts.
	refused int
}

// failureMode scripts the fake for one ticket and says what must come of
// it per destination; a destination left out does not apply (see why).
type failureMode struct {
	name string
	// setup scripts the fake; create and lookup are the request kinds of
	// the destination under test.
	setup func(f *fakehelpdesk.Server, create, lookup fakehelpdesk.Kind)
	// between runs after each engine step (n from 1), before the next.
	between func(f *fakehelpdesk.Server, n int)
	// check looks at the records after each step.
	check func(t *testing.T, t0 time.Time, steps []delivery.Record)
	// operator, when set, is what a person does once the ticket is
	// final, after the helpdesk forgot its idempotency keys: retry a
	// failed ticket, or resolve an unknown one as to be sent again. The
	// ticket then runs on until final again.
	operator func(ctx context.Context, a delivery.Admin, st delivery.State, id string, now time.Time) error
	want     map[string]expect
}

// retryFailed is the operator's retry, for a failed ticket.
func retryFailed(ctx context.Context, a delivery.Admin, st delivery.State, id string, now time.Time) error {
	if st != delivery.StateFailed {
		return nil
	}
	return delivery.Retry(ctx, a, id, now)
}

// resendUnknown is the operator's resolve-resend, for an unknown ticket.
func resendUnknown(ctx context.Context, a delivery.Admin, st delivery.State, id string, now time.Time) error {
	if st != delivery.StateUnknown {
		return nil
	}
	return delivery.ResolveResend(ctx, a, id, now)
}

// lastOf scripts the destination's creates so that only the last of
// matrixMaxAttempts sends reaches the helpdesk: the ones before are
// answered 429 (created nothing), the last gets fault.
func lastOf(f *fakehelpdesk.Server, create fakehelpdesk.Kind, fault fakehelpdesk.Fault) {
	f.Script(fakehelpdesk.Rule{Kind: create, Times: matrixMaxAttempts - 1, Fault: fakehelpdesk.TooManyRequests("1")})
	f.Script(fakehelpdesk.Rule{Kind: create, N: matrixMaxAttempts, Fault: fault})
}

// lagLookupsDropLast makes lookups lag and the final create commit and
// then drop its answer, the attempts before it refused with 429.
func lagLookupsDropLast(f *fakehelpdesk.Server, create, _ fakehelpdesk.Kind) {
	f.SetLookupLag(0, lookupLag)
	lastOf(f, create, fakehelpdesk.CommitThenDrop())
}

// lateCommit is how long after a create's arrival the fake commits it in
// the late-commit modes: past the client's timeout, inside the outcome
// window.
const lateCommit = time.Second

// lookupLag is how long a committed ticket stays invisible to lookups in
// the lag modes, on the fake's clock: inside the outcome window.
const lookupLag = 3 * time.Second

// errorSays checks that the final record's error contains text.
func errorSays(text string) func(*testing.T, time.Time, []delivery.Record) {
	return func(t *testing.T, _ time.Time, steps []delivery.Record) {
		t.Helper()
		if last := steps[len(steps)-1]; !strings.Contains(last.Error, text) {
			t.Fatalf("final error %q, want it to say %q", last.Error, text)
		}
	}
}

// onCreate is a setup that scripts r on the destination's create requests.
func onCreate(r fakehelpdesk.Rule) func(f *fakehelpdesk.Server, create, lookup fakehelpdesk.Kind) {
	return func(f *fakehelpdesk.Server, create, _ fakehelpdesk.Kind) {
		r.Kind = create
		f.Script(r)
	}
}

func delivered(creates int) expect { return expect{delivery.StateDelivered, 1, creates, 0} }

func dueNotBefore(d time.Duration) func(*testing.T, time.Time, []delivery.Record) {
	return func(t *testing.T, t0 time.Time, steps []delivery.Record) {
		t.Helper()
		if first := steps[0]; first.State != delivery.StatePending || first.DueAt.Before(t0.Add(d)) {
			t.Fatalf("after the first send: %+v; want pending, due no earlier than %s (Retry-After %s)", first, t0.Add(d), d)
		}
	}
}

// failureModes are the ways real helpdesks fail, as the fake scripts them.
var failureModes = []failureMode{
	{name: "no failure",
		setup: func(*fakehelpdesk.Server, fakehelpdesk.Kind, fakehelpdesk.Kind) {},
		want:  map[string]expect{destLinear: delivered(1), destZendesk: delivered(1), destWebhook: delivered(1), destNoLookup: delivered(1)}},
	{name: "commit then drop the connection",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.CommitThenDrop()}),
		// Looked up and found; without lookup, resent under the same key
		// and answered from the helpdesk's idempotency record.
		want: map[string]expect{destLinear: delivered(1), destZendesk: delivered(1), destWebhook: delivered(1), destNoLookup: delivered(2)}},
	{name: "commit then 5xx",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.CommitThenStatus(502)}),
		want:  map[string]expect{destLinear: delivered(1), destZendesk: delivered(1), destWebhook: delivered(1), destNoLookup: delivered(2)}},
	{name: "commit then answer past the client timeout",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.CommitThenSlow(5 * time.Second)}),
		// Without lookup the resend may meet the first request still in
		// progress (409), then be answered from the idempotency record.
		want: map[string]expect{destLinear: delivered(1), destZendesk: delivered(1), destWebhook: delivered(1), destNoLookup: {delivery.StateDelivered, 1, -1, 0}}},
	{name: "429 with Retry-After",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.TooManyRequests("7")}),
		check: dueNotBefore(7 * time.Second),
		want:  map[string]expect{destLinear: delivered(2), destZendesk: delivered(2), destWebhook: delivered(2), destNoLookup: delivered(2)}},
	{name: "503 with Retry-After",
		setup: onCreate(fakehelpdesk.Rule{Times: 2, Fault: fakehelpdesk.Unavailable("30")}),
		// A 5xx: the outcome is unknown, so each resend follows a lookup.
		check: dueNotBefore(30 * time.Second),
		want:  map[string]expect{destLinear: delivered(3), destZendesk: delivered(3), destWebhook: delivered(3), destNoLookup: delivered(3)}},
	{name: "idempotency key expired before the retry",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.CommitThenDrop()}),
		between: func(f *fakehelpdesk.Server, n int) {
			if n == 1 {
				f.Advance(fakehelpdesk.DefaultKeyTTL + time.Hour) // the helpdesk forgot the key
			}
		},
		// Only a lookup can tell: a blind resend would create a second
		// ticket, which is why it is never made where a lookup exists.
		// Without lookup, exactly once rests on the helpdesk keeping the
		// key longer than the retries last: not applicable.
		want: map[string]expect{destLinear: delivered(1), destZendesk: delivered(1), destWebhook: delivered(1)}},
	{name: "lookups lag behind writes",
		setup: func(f *fakehelpdesk.Server, c, _ fakehelpdesk.Kind) {
			f.SetLookupLag(1, 0)
			f.Script(fakehelpdesk.Rule{Kind: c, N: 1, Fault: fakehelpdesk.CommitThenDrop()})
		},
		// The lagging lookup says absent; the resend carries the same key
		// and the helpdesk answers it from its idempotency record.
		want: map[string]expect{destLinear: delivered(2), destZendesk: delivered(2), destWebhook: delivered(2)}},
	{name: "400 IdempotentRequestError",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.IdempotentRequestError()}),
		// Zendesk's answer for a reused key: outcome unknown, looked up,
		// then sent. (For a webhook, 400 is a permanent refusal.)
		want: map[string]expect{destZendesk: delivered(2)}},
	{name: "409 in progress",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.InProgress()}),
		want:  map[string]expect{destLinear: delivered(2), destZendesk: delivered(2), destWebhook: delivered(2), destNoLookup: delivered(2)}},
	{name: "permanent 422",
		setup: onCreate(fakehelpdesk.Rule{Times: 100, Fault: fakehelpdesk.Refuse(422)}),
		check: func(t *testing.T, _ time.Time, steps []delivery.Record) {
			if len(steps) != 1 || steps[0].Attempts != 1 {
				t.Fatalf("records %+v; want failed after one attempt", steps)
			}
		},
		want: map[string]expect{destLinear: {delivery.StateFailed, 0, 1, 0}, destZendesk: {delivery.StateFailed, 0, 1, 0}, destWebhook: {delivery.StateFailed, 0, 1, 0}, destNoLookup: {delivery.StateFailed, 0, 1, 0}}},
	{name: "outage: 429 on every send",
		setup: onCreate(fakehelpdesk.Rule{Times: 100, Fault: fakehelpdesk.TooManyRequests("1")}),
		// Every outcome known not created: failed after max_attempts sends,
		// with or without lookup.
		want: map[string]expect{destLinear: {delivery.StateFailed, 0, matrixMaxAttempts, 0}, destZendesk: {delivery.StateFailed, 0, matrixMaxAttempts, 0},
			destWebhook: {delivery.StateFailed, 0, matrixMaxAttempts, 0}, destNoLookup: {delivery.StateFailed, 0, matrixMaxAttempts, 0}}},
	{name: "outage: 503 on every send",
		setup: onCreate(fakehelpdesk.Rule{Times: 100, Fault: fakehelpdesk.Unavailable("1")}),
		// A 5xx may have created it: with lookup, the lookups rule each send
		// out (failed); without, a person must decide (unknown).
		want: map[string]expect{destLinear: {delivery.StateFailed, 0, matrixMaxAttempts, 0}, destZendesk: {delivery.StateFailed, 0, matrixMaxAttempts, 0},
			destWebhook: {delivery.StateFailed, 0, matrixMaxAttempts, 0}, destNoLookup: {delivery.StateUnknown, 0, matrixMaxAttempts, 0}}},
	{name: "outage: every connection dropped, nothing created",
		setup: onCreate(fakehelpdesk.Rule{Times: 100, Fault: fakehelpdesk.Drop()}),
		// With lookup, the final lookup rules every send out: failed.
		// Without, any send may have created it: unknown, for a person.
		want: map[string]expect{destLinear: {delivery.StateFailed, 0, matrixMaxAttempts, 0}, destZendesk: {delivery.StateFailed, 0, matrixMaxAttempts, 0},
			destWebhook: {delivery.StateFailed, 0, matrixMaxAttempts, 0}, destNoLookup: {delivery.StateUnknown, 0, matrixMaxAttempts, 0}}},
	{name: "outage: committed, then the connection and every lookup fail",
		setup: func(f *fakehelpdesk.Server, c, l fakehelpdesk.Kind) {
			f.Script(fakehelpdesk.Rule{Kind: c, N: 1, Fault: fakehelpdesk.CommitThenDrop()})
			f.Script(fakehelpdesk.Rule{Kind: l, Times: 100, Fault: fakehelpdesk.Unavailable("")})
		},
		// Never resent blindly: no send while no lookup answers; unknown
		// once the lookups run out.
		want: map[string]expect{destLinear: {delivery.StateUnknown, 1, 1, 0}, destZendesk: {delivery.StateUnknown, 1, 1, 0}, destWebhook: {delivery.StateUnknown, 1, 1, 0}}},
	{name: "late commit after the client timeout",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.LateCommit(lateCommit)}),
		// Looked up once the send's outcome window has closed: found.
		// Without lookup, the resend after the window is answered from
		// the idempotency record.
		want: map[string]expect{destLinear: delivered(1), destZendesk: delivered(1), destWebhook: delivered(1), destNoLookup: delivered(2)}},
	{name: "late commit after the client timeout, on the final attempt",
		setup: func(f *fakehelpdesk.Server, c, _ fakehelpdesk.Kind) {
			lastOf(f, c, fakehelpdesk.LateCommit(lateCommit))
		},
		// A lookup right after the timeout would answer absent: the
		// ticket waits for the window, then is found. Without lookup, the
		// last send may have created it: unknown, and the helpdesk holds
		// it once.
		want: map[string]expect{destLinear: delivered(matrixMaxAttempts), destZendesk: delivered(matrixMaxAttempts), destWebhook: delivered(matrixMaxAttempts),
			destNoLookup: {delivery.StateUnknown, 1, matrixMaxAttempts, 0}}},
	{name: "lookups lag, on the final attempt",
		setup: lagLookupsDropLast,
		want: map[string]expect{destLinear: delivered(matrixMaxAttempts), destZendesk: delivered(matrixMaxAttempts), destWebhook: delivered(matrixMaxAttempts),
			destNoLookup: {delivery.StateUnknown, 1, matrixMaxAttempts, 0}}},
	{name: "lookups lag, on the final attempt, then an operator retry",
		setup: lagLookupsDropLast,
		// Found once the window closed, so there is nothing to retry: a
		// retry after the key window, with the send ruled out by a lagging
		// lookup, would make a second ticket. (Without lookup, a person who
		// resends an unknown ticket the helpdesk holds makes the second
		// one: not applicable.)
		operator: retryFailed,
		want:     map[string]expect{destLinear: delivered(matrixMaxAttempts), destZendesk: delivered(matrixMaxAttempts), destWebhook: delivered(matrixMaxAttempts)}},
	{name: "final lookups fail, then an operator resend after the key window",
		setup: func(f *fakehelpdesk.Server, c, l fakehelpdesk.Kind) {
			lastOf(f, c, fakehelpdesk.CommitThenDrop())
			f.Script(fakehelpdesk.Rule{Kind: l, Times: matrixMaxAttempts, Fault: fakehelpdesk.Unavailable("")})
		},
		// Unknown once the lookups ran out; the person's resend still
		// looks up first, and finds it.
		operator: resendUnknown,
		want:     map[string]expect{destLinear: delivered(matrixMaxAttempts), destZendesk: delivered(matrixMaxAttempts), destWebhook: delivered(matrixMaxAttempts)}},
	{name: "rate-limited lookups",
		setup: func(f *fakehelpdesk.Server, c, l fakehelpdesk.Kind) {
			f.Script(fakehelpdesk.Rule{Kind: c, N: 1, Fault: fakehelpdesk.CommitThenDrop()})
			f.Script(fakehelpdesk.Rule{Kind: l, Times: 2, Fault: fakehelpdesk.TooManyRequests("7")})
		},
		check: func(t *testing.T, _ time.Time, steps []delivery.Record) {
			t.Helper()
			// Step 2 ran at steps[0].DueAt and its lookup was refused.
			if r := steps[1]; r.LookupFailures != 1 || r.DueAt.Before(steps[0].DueAt.Add(7*time.Second)) {
				t.Fatalf("after a lookup answered 429: %+v; want due no earlier than %v (Retry-After 7 s)", r, steps[0].DueAt.Add(7*time.Second))
			}
		},
		want: map[string]expect{destLinear: delivered(1), destZendesk: delivered(1), destWebhook: delivered(1)}},
	{name: "rate-limited lookups for good",
		setup: func(f *fakehelpdesk.Server, c, l fakehelpdesk.Kind) {
			f.Script(fakehelpdesk.Rule{Kind: c, N: 1, Fault: fakehelpdesk.CommitThenDrop()})
			f.Script(fakehelpdesk.Rule{Kind: l, Times: 100, Fault: fakehelpdesk.TooManyRequests("1")})
		},
		check: errorSays("lookups ran out"),
		want:  map[string]expect{destLinear: {delivery.StateUnknown, 1, 1, 0}, destZendesk: {delivery.StateUnknown, 1, 1, 0}, destWebhook: {delivery.StateUnknown, 1, 1, 0}}},
	{name: "lookups refused (403), sends accepted",
		setup: func(f *fakehelpdesk.Server, c, l fakehelpdesk.Kind) {
			f.Script(fakehelpdesk.Rule{Kind: c, N: 1, Fault: fakehelpdesk.CommitThenDrop()})
			f.Script(fakehelpdesk.Rule{Kind: l, Times: 100, Fault: fakehelpdesk.Forbidden()})
		},
		// A token that may create but not list: each refused lookup is a
		// failed lookup of the ticket, never resent blindly, and the
		// ticket ends unknown once they run out (never pending for ever).
		check: func(t *testing.T, _ time.Time, steps []delivery.Record) {
			t.Helper()
			errorSays("lookups ran out")(t, time.Time{}, steps)
			for i, r := range steps[1:] {
				if r.LookupFailures != i+1 {
					t.Fatalf("step %d: %+v; want %d failed lookups", i+2, r, i+1)
				}
			}
		},
		want: map[string]expect{destLinear: {delivery.StateUnknown, 1, 1, 0}, destZendesk: {delivery.StateUnknown, 1, 1, 0}, destWebhook: {delivery.StateUnknown, 1, 1, 0}}},
	{name: "revoked token, then restored",
		setup: func(f *fakehelpdesk.Server, _, _ fakehelpdesk.Kind) { f.SetRevoked(true) },
		between: func(f *fakehelpdesk.Server, n int) {
			if n == 2 {
				f.SetRevoked(false)
			}
		},
		check: func(t *testing.T, _ time.Time, steps []delivery.Record) {
			t.Helper()
			for _, r := range steps[:2] {
				if r.State != delivery.StatePending || r.Attempts != 0 || r.SentUnknown {
					t.Fatalf("while revoked: %+v; want pending, no send counted", r)
				}
			}
		},
		want: map[string]expect{destLinear: {delivery.StateDelivered, 1, 3, 2}, destZendesk: {delivery.StateDelivered, 1, 3, 2}, destWebhook: {delivery.StateDelivered, 1, 3, 2},
			destNoLookup: {delivery.StateDelivered, 1, 3, 2}}},
	// Linear's own failures, as its GraphQL API answers them.
	{name: "GraphQL error in a 200: wrong teamId",
		setup: onCreate(fakehelpdesk.Rule{Times: 100, Fault: fakehelpdesk.LinearError(200, "invalid input", "Entity not found: Team - Could not find referenced Team.")}),
		// Refused for good after one send, once the lookup of the id
		// (what a duplicate id could also look like) found nothing.
		check: errorSays("no issue has the ticket's id"),
		want:  map[string]expect{destLinear: {delivery.StateFailed, 0, 1, 0}}},
	{name: "RATELIMITED in a 400, requests budget spent",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.LinearRateLimited(400, "Requests", 90*time.Second)}),
		check: dueNotBefore(90 * time.Second),
		want:  map[string]expect{destLinear: delivered(2)}},
	{name: "RATELIMITED in a 429, complexity budget spent",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.LinearRateLimited(429, "Complexity", 40*time.Second)}),
		check: dueNotBefore(40 * time.Second),
		want:  map[string]expect{destLinear: delivered(2)}},
	{name: "dropped before the commit, then resent at once",
		setup: onCreate(fakehelpdesk.Rule{N: 1, Fault: fakehelpdesk.Drop()}),
		// Looked up after the backoff alone (no outcome window), absent,
		// resent in the same step.
		check: func(t *testing.T, t0 time.Time, steps []delivery.Record) {
			t.Helper()
			if end := t0.Add(delivery.OutcomeWindow(matrixTimeout)); !steps[0].DueAt.Before(end) {
				t.Fatalf("after the dropped send: due %v, want before the outcome window's end %v", steps[0].DueAt, end)
			}
			if len(steps) != 2 {
				t.Fatalf("%d steps, want 2 (the send, then the lookup and the resend)", len(steps))
			}
		},
		want: map[string]expect{destLinear: delivered(2)}},
	{name: "duplicate id answered as invalid input",
		setup: duplicateAfterLag(fakehelpdesk.DuplicateInvalidInput),
		want:  map[string]expect{destLinear: delivered(2)}},
	{name: "duplicate id answered as a conflict",
		setup: duplicateAfterLag(fakehelpdesk.DuplicateConflict),
		want:  map[string]expect{destLinear: delivered(2)}},
	{name: "duplicate id answered with the existing issue",
		setup: duplicateAfterLag(fakehelpdesk.DuplicateExisting),
		want:  map[string]expect{destLinear: delivered(2)}},
}

// duplicateAfterLag makes the first create commit and drop its answer and
// the first lookup miss it, so that the resend meets the existing id,
// answered as d says.
func duplicateAfterLag(d fakehelpdesk.Duplicate) func(f *fakehelpdesk.Server, create, lookup fakehelpdesk.Kind) {
	return func(f *fakehelpdesk.Server, create, _ fakehelpdesk.Kind) {
		f.SetLinearDuplicate(d)
		f.SetLookupLag(1, 0)
		f.Script(fakehelpdesk.Rule{Kind: create, N: 1, Fault: fakehelpdesk.CommitThenDrop()})
	}
}

// settle waits (on the real clock, at most a few seconds) until the fake
// has no create in flight: a create held for a late commit has been
// committed. The matrix moves the engine's clock to each due time at once;
// settling first makes what the helpdesk does within that time happen
// before the next step, as it would while the ticket waited.
func settle(t *testing.T, f *fakehelpdesk.Server) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); f.InFlight() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the fake still has %d creates in flight", f.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newDest(t *testing.T, f *fakehelpdesk.Server, kind string) (delivery.Destination, fakehelpdesk.Kind, fakehelpdesk.Kind) {
	t.Helper()
	return newDestTimeout(t, f, kind, matrixTimeout)
}

// newDestTimeout is newDest with the given client timeout.
func newDestTimeout(t *testing.T, f *fakehelpdesk.Server, kind string, timeout time.Duration) (delivery.Destination, fakehelpdesk.Kind, fakehelpdesk.Kind) {
	t.Helper()
	fc := f.Config()
	var d delivery.Destination
	var err error
	create, lookup := fakehelpdesk.WebhookCreate, fakehelpdesk.WebhookLookup
	switch kind {
	case destZendesk:
		create, lookup = fakehelpdesk.ZendeskCreate, fakehelpdesk.ZendeskLookup
		d, err = zendesk.New(zendesk.Config{URL: f.URL(), Email: fc.Email, Token: fc.Token, Timeout: timeout})
	case destLinear:
		create, lookup = fakehelpdesk.LinearCreate, fakehelpdesk.LinearLookup
		d, err = linear.New(linear.Config{URL: f.LinearURL(), TeamID: fc.LinearTeamID, APIKey: fc.LinearKey, Timeout: timeout, Now: f.Now})
	default:
		d, err = webhook.New(webhook.Config{URL: f.WebhookURL(), Secret: fc.Secret, Lookup: kind == destWebhook, Timeout: timeout, Now: f.Now})
	}
	if err != nil {
		t.Fatal(err)
	}
	return d, create, lookup
}

// figure is one row of the helpdesk-calls figure.
type figure struct {
	mode, dest       string
	state            delivery.State
	creates, lookups int
	steps            int
}

// engineRun is a run of the matrix's engine on the tickets of one Env,
// whose clock the engine reads and moves together with the fake
// helpdesk's.
type engineRun struct {
	t     *testing.T
	e     *deliverytest.Env
	f     *fakehelpdesk.Server
	eng   *delivery.Engine
	steps []delivery.Record // the record each step left
}

// newRun is a run of the engine over s sending to d with the given client
// timeout, the matrix's attempts and the lease that timeout calls for.
func newRun(t *testing.T, s deliverytest.Adapter, e *deliverytest.Env, f *fakehelpdesk.Server, d delivery.Destination, timeout time.Duration) *engineRun {
	return &engineRun{t: t, e: e, f: f, eng: &delivery.Engine{Store: s, Destination: d, MaxAttempts: matrixMaxAttempts,
		Lease: delivery.LeaseFor(timeout), CallTimeout: timeout, Now: func() time.Time { return e.Now }}}
}

// advance moves the engine's clock and the fake's together, never back.
func (r *engineRun) advance(to time.Time) {
	if d := to.Sub(r.e.Now); d > 0 {
		r.f.Advance(d)
		r.e.Now = to
	}
}

// step runs the engine on ticket id as step n of at most limit and
// returns the record it left; the test stops past the limit or when the
// engine fails.
func (r *engineRun) step(id string, n, limit int) delivery.Record {
	r.t.Helper()
	if n > limit {
		r.t.Fatalf("not final after %d steps: %+v", n-1, r.steps)
	}
	if _, err := r.eng.Deliver(context.Background(), id); err != nil {
		r.t.Fatalf("step %d: %v", n, err)
	}
	rec := r.e.Record(id)
	r.steps = append(r.steps, rec)
	return rec
}

// Run runs the real engine over a store opened by h against the fake
// helpdesk, through the real Zendesk and webhook adapters, under each
// failure mode the fake scripts: every ticket ends as the mode says, the
// fake never holds a ticket twice, a permanent refusal fails after one
// attempt, an outage ends failed or unknown (never dropped, never resent
// blindly); duplicate wake-ups and two racing workers send once. It logs
// the helpdesk calls each ticket took, per mode and destination, and when
// the environment names a file in results.DeliveryMatrixEnv (make bench
// does), writes them there as results.DeliveryMatrix.
func Run(t *testing.T, h deliverytest.Harness) {
	ctx := context.Background()
	s := h.Open(t)
	var (
		mu   sync.Mutex
		figs []figure
	)
	for _, m := range failureModes {
		for _, kind := range matrixDests {
			want, ok := m.want[kind]
			if !ok {
				continue
			}
			t.Run(m.name+"/"+kind, func(t *testing.T) {
				f := fakehelpdesk.New(t, fakehelpdesk.Config{})
				d, create, lookup := newDest(t, f, kind)
				m.setup(f, create, lookup)
				e := deliverytest.NewEnv(t, s, true)
				id := e.Create(fmt.Sprintf(`{"title":%q,"description":"matrix"}`, m.name))
				t0 := e.Now
				run := newRun(t, s, e, f, d, matrixTimeout)
				operated := m.operator == nil
				reset := 0 // creates before the operator reset the attempts
				for n := 1; ; n++ {
					r := run.step(id, n, 4*matrixMaxAttempts+4)
					if !r.State.Live() {
						if operated {
							break
						}
						operated = true
						settle(t, f)
						reset = f.Requests(create)
						run.advance(e.Now.Add(fakehelpdesk.DefaultKeyTTL + time.Hour)) // the helpdesk forgot the key
						if err := m.operator(ctx, s, r.State, id, e.Now); err != nil {
							t.Fatalf("operator: %v", err)
						}
						if r = e.Record(id); !r.State.Live() {
							reset = 0 // nothing to do: the count stands
							break
						}
						continue
					}
					if r.State != delivery.StatePending {
						t.Fatalf("step %d left %+v", n, r)
					}
					if m.between != nil {
						m.between(f, n)
					}
					settle(t, f)
					run.advance(r.DueAt) // the next step runs when due
				}
				settle(t, f)
				final := run.steps[len(run.steps)-1]
				creates, lookups := f.Requests(create), f.Requests(lookup)
				if final.State != want.state || f.Held(id) != want.held || (want.creates >= 0 && creates != want.creates) {
					t.Fatalf("ended %s after %d steps (%d creates, %d lookups), the fake holds %d; want %s, %d held, %d creates\nrecords: %+v",
						final.State, len(run.steps), creates, lookups, f.Held(id), want.state, want.held, want.creates, run.steps)
				}
				if f.Total() != want.held {
					t.Fatalf("the fake holds %d tickets in all, want %d", f.Total(), want.held)
				}
				if final.Attempts != creates-want.refused-reset {
					t.Fatalf("record counts %d attempts, the fake received %d creates, %d of them refused as unauthorized, %d before the operator reset the count",
						final.Attempts, creates, want.refused, reset)
				}
				switch final.State {
				case delivery.StateDelivered:
					if final.ExternalID == "" {
						t.Fatalf("delivered without the helpdesk's id: %+v", final)
					}
					if v := e.Get(id); v.Delivery == nil || v.Delivery.ExternalID != final.ExternalID {
						t.Fatalf("get_ticket delivery = %+v", v.Delivery)
					}
				case delivery.StateFailed, delivery.StateUnknown:
					// Never silently dropped: a person finds it by its state.
					if final.Error == "" {
						t.Fatalf("%s without an error: %+v", final.State, final)
					}
					listed, err := s.List(ctx, final.State, 1000)
					if err != nil || !slices.ContainsFunc(listed, func(r delivery.Record) bool { return r.TicketID == id }) {
						t.Fatalf("%s ticket not listed: %v", final.State, err)
					}
				}
				if m.check != nil {
					m.check(t, t0, run.steps)
				}
				mu.Lock()
				figs = append(figs, figure{m.name, kind, final.State, creates, lookups, len(run.steps)})
				mu.Unlock()
			})
		}
	}

	for _, kind := range matrixDests {
		t.Run(takeoverMode+"/"+kind, func(t *testing.T) {
			g := takeover(t, s, kind)
			mu.Lock()
			figs = append(figs, g)
			mu.Unlock()
		})
	}

	t.Run("duplicate wake-ups of one ticket send once", func(t *testing.T) {
		f := fakehelpdesk.New(t, fakehelpdesk.Config{})
		d, create, _ := newDest(t, f, destZendesk)
		e := deliverytest.NewEnv(t, s, true)
		id := e.Create(`{"title":"woken twice"}`)
		eng := &delivery.Engine{Store: s, Destination: d, Now: func() time.Time { return e.Now }}
		// The commit's wake-up, the poll, a stream record and its redelivery.
		wins, refused := deliverytest.Race(t, 4, func(int) error {
			st, err := eng.Deliver(ctx, id)
			if err == nil && st != delivery.StateDelivered {
				return fmt.Errorf("delivered as %s", st)
			}
			return err
		})
		if _, err := eng.Deliver(ctx, id); !errors.Is(err, delivery.ErrNotClaimable) {
			t.Fatalf("a late wake-up: %v, want ErrNotClaimable", err)
		}
		if wins != 1 || refused != 3 || f.Held(id) != 1 || f.Requests(create) != 1 {
			t.Fatalf("%d delivered, %d refused; the fake holds %d after %d creates; want 1, 3, 1, 1",
				wins, refused, f.Held(id), f.Requests(create))
		}
	})

	t.Run("two workers racing over the same tickets send each once", func(t *testing.T) {
		rs := h.Open(t) // a store of its own: the workers sweep everything due
		f := fakehelpdesk.New(t, fakehelpdesk.Config{})
		d, create, _ := newDest(t, f, destWebhook)
		e := deliverytest.NewEnv(t, rs, true)
		var ids []string
		for i := range 12 {
			ids = append(ids, e.Create(fmt.Sprintf(`{"title":"race %d"}`, i)))
		}
		eng := &delivery.Engine{Store: rs, Destination: d, Now: func() time.Time { return e.Now }}
		deliverytest.SweepAll(ctx, eng, 2, 4)
		for _, id := range ids {
			if r := e.Record(id); r.State != delivery.StateDelivered || f.Held(id) != 1 {
				t.Fatalf("%s: %+v, the fake holds %d", id, r, f.Held(id))
			}
		}
		if f.Total() != len(ids) || f.Requests(create) != len(ids) {
			t.Fatalf("the fake holds %d tickets after %d creates, want %d and %d", f.Total(), f.Requests(create), len(ids), len(ids))
		}
	})

	mu.Lock()
	defer mu.Unlock()
	if len(figs) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "helpdesk calls per ticket (max_attempts %d, client timeout %s):\n", matrixMaxAttempts, matrixTimeout)
	fmt.Fprintf(&b, "  %-60s %-18s %-10s %7s %7s %5s %5s\n", "failure mode", "destination", "ends", "creates", "lookups", "calls", "steps")
	for _, g := range figs {
		fmt.Fprintf(&b, "  %-60s %-18s %-10s %7d %7d %5d %5d\n", g.mode, g.dest, g.state, g.creates, g.lookups, g.creates+g.lookups, g.steps)
	}
	t.Log(b.String())
	// Only a passing run's figures are written: make bench reports them as
	// asserted.
	if out := os.Getenv(results.DeliveryMatrixEnv); out != "" && !t.Failed() {
		if err := results.WriteJSON(out, matrixResults(figs)); err != nil {
			t.Fatal(err)
		}
	}
}

// matrixResults are the figures as make bench reads them.
func matrixResults(figs []figure) results.DeliveryMatrix {
	m := results.DeliveryMatrix{MaxAttempts: matrixMaxAttempts, ClientTimeoutMs: float64(matrixTimeout) / float64(time.Millisecond)}
	for _, g := range figs {
		m.Rows = append(m.Rows, results.DeliveryMatrixRow{Mode: g.mode, Destination: g.dest, State: string(g.state),
			Creates: g.creates, Lookups: g.lookups, Steps: g.steps})
	}
	return m
}

// takeoverMode names the lapsed-lease row; its client timeout is its own.
var takeoverMode = fmt.Sprintf("lease lapsed mid-send, late commit, no 409 (timeout %s)", config.MinDeliveryTimeout)

// takeover is the lapsed-lease row, at the shortest client timeout the
// configuration allows (so the lease, 2·timeout + 3 s, is shorter than the
// outcome window counted from a send late in it): worker A claims the
// ticket, sends late in its lease to a receiver that checks the key on
// arrival, commits inside the send's outcome window and never answers 409
// meanwhile, and dies before recording. Worker B takes over a second
// after the lease's end. Without lookup it must not resend before that
// window has closed, or the receiver holds two tickets; with lookup, the
// lookup inside the window answers "not yet known" and the ticket is found
// after it. Either way the helpdesk ends holding one ticket.
func takeover(t *testing.T, s deliverytest.Adapter, kind string) figure {
	ctx := context.Background()
	timeout := config.MinDeliveryTimeout
	f := fakehelpdesk.New(t, fakehelpdesk.Config{})
	d, create, lookup := newDestTimeout(t, f, kind, timeout)
	e := deliverytest.NewEnv(t, s, true)
	id := e.Create(`{"title":"taken over","description":"matrix"}`)
	run := newRun(t, s, e, f, d, timeout)
	eng := run.eng
	window := delivery.OutcomeWindow(timeout)
	lease := delivery.CeilSecond(e.Now.Add(eng.Lease))
	c, err := s.Claim(ctx, id, "dead-worker", e.Now, lease)
	if err != nil {
		t.Fatal(err)
	}
	// A sends as late as its calls may start: the lease's end less the
	// engine's margin (half of so short a lease). The receiver commits
	// most of a window after the send's start.
	sendAt := lease.Add(-eng.Lease / 2).Add(-50 * time.Millisecond)
	run.advance(sendAt)
	commitAfter := window - time.Second
	f.Script(fakehelpdesk.Rule{Kind: create, N: 1, Fault: fakehelpdesk.LateCommitUnlocked(commitAfter)})
	if _, err := d.Send(ctx, c.Ticket); err == nil {
		t.Fatal("the held create was answered")
	}
	// A dies here. B takes over a second after the lease's end, before
	// the receiver has committed A's send.
	run.advance(lease.Add(time.Second))
	if !e.Now.Before(sendAt.Add(commitAfter)) {
		t.Fatalf("the takeover at %v is not before the commit at %v", e.Now, sendAt.Add(commitAfter))
	}
	for n := 1; ; n++ {
		r := run.step(id, n, 4*matrixMaxAttempts)
		if !r.State.Live() {
			break
		}
		run.advance(r.DueAt)
	}
	steps := run.steps
	// Whatever the receiver still holds commits within the window.
	run.advance(e.Now.Add(window))
	final := steps[len(steps)-1]
	creates, lookups := f.Requests(create), f.Requests(lookup)
	if final.State != delivery.StateDelivered || f.Held(id) != 1 || f.Total() != 1 {
		t.Fatalf("ended %s after %d steps (%d creates, %d lookups); the receiver holds %d tickets under the key, %d in all; want delivered, 1\nrecords: %+v",
			final.State, len(steps), creates, lookups, f.Held(id), f.Total(), steps)
	}
	if kind == destLinear {
		// Creates keyed by the ticket id: B looks up, finds nothing yet,
		// and resends at once; A's create, committing later, meets the
		// id B's resend created and makes nothing.
		if first := steps[0]; first.State != delivery.StateDelivered || first.Attempts != 2 || creates != 2 {
			t.Fatalf("after the takeover: %+v after %d creates; want delivered by B's resend, A's send and B's counted", first, creates)
		}
	} else if first := steps[0]; first.State != delivery.StatePending || first.DueAt.Before(lease.Add(window)) || first.Attempts != 1 {
		t.Fatalf("after the takeover: %+v; want pending, A's send counted, due no earlier than its window's end %v", first, lease.Add(window))
	}
	return figure{takeoverMode, kind, final.State, creates, lookups, len(steps)}
}
