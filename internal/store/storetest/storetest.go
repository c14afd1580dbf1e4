// Package storetest is the one conformance suite every core.Store adapter
// passes: it drives the real domain logic (core.Service) over the adapter
// on its real backing store (SQLite on a temp file, DynamoDB Local), so the
// guarantees of docs/contract.md, Stored items, are proven per store, not
// per fake.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
)

// Adapter is what the suite needs of an adapter beyond core.Store.
type Adapter interface {
	core.Store
	// PutOperation writes an operation as is (pending or expired records).
	PutOperation(ctx context.Context, op core.Operation) error
	// CountTickets counts every stored ticket.
	CountTickets(ctx context.Context) (int, error)
}

// Harness opens an adapter for the suite.
type Harness struct {
	// Open returns a store on fresh, empty storage, and reopen, which closes
	// that store and opens the same storage again (a restart). now is the
	// suite's clock: a store that reads a clock of its own (a purge at
	// open, say) must read this one.
	Open func(t *testing.T, now func() time.Time) (s Adapter, reopen func(t *testing.T) Adapter)
}

// Users returns the users of the suite, a new map on each call: two
// tenants, two users in tenant-a.
func Users() memstore.Users {
	return memstore.Users{
		"user-a": {TenantID: "tenant-a", UserID: "alice"},
		"user-c": {TenantID: "tenant-a", UserID: "carol"},
		"user-b": {TenantID: "tenant-b", UserID: "bob"},
	}
}

// Env is one store under test with a service over it.
type Env struct {
	T     *testing.T
	Store Adapter
	Svc   *core.Service
	Now   time.Time
	ids   atomic.Int64
}

// NewEnv builds a Service over s with predictable ids and a clock that
// moves only when the test moves it, starting at the current second.
func NewEnv(t *testing.T, s Adapter, policy opkey.Policy) *Env {
	e := &Env{T: t, Now: time.Now().UTC().Truncate(time.Second)}
	e.serve(s, policy)
	return e
}

// Clock reads e.Now: the clock to give a store that reads one of its own.
func (e *Env) Clock() time.Time { return e.Now }

func (e *Env) serve(s Adapter, policy opkey.Policy) {
	e.Store = s
	prefix := fmt.Sprintf("t%x", time.Now().UnixNano())
	e.Svc = &core.Service{
		Store: s, Users: Users(), Policy: policy, Retention: 24 * time.Hour,
		Now:   e.Clock,
		NewID: func() string { return fmt.Sprintf("%s-%d", prefix, e.ids.Add(1)) },
	}
}

// Shifts are the clocks the suite runs at: today, and a year on either
// side, so that no guarantee holds only on the day it was written.
var Shifts = []struct {
	Name string
	By   time.Duration
}{{"today", 0}, {"a year ahead", 365 * 24 * time.Hour}, {"a year behind", -365 * 24 * time.Hour}}

// Create sends create_ticket for user with request id and title.
func (e *Env) Create(user, requestID, content string) core.Outcome {
	e.T.Helper()
	return e.Svc.Answer(context.Background(), core.Call{
		Function: core.CreateTicket, Content: json.RawMessage(content),
		ExternalUserID: user, RequestID: requestID,
	})
}

// Get sends get_ticket.
func (e *Env) Get(user, ticketID string) core.Outcome {
	e.T.Helper()
	content, _ := json.Marshal(map[string]string{"ticket_id": ticketID})
	return e.Svc.Answer(context.Background(), core.Call{
		Function: core.GetTicket, Content: content, ExternalUserID: user,
	})
}

// Tickets counts stored tickets.
func (e *Env) Tickets() int {
	e.T.Helper()
	return count(e.T, e.Store)
}

// Want fails the test unless o has kind k.
func Want(t *testing.T, o core.Outcome, k core.Kind) {
	t.Helper()
	if o.Kind != k {
		t.Fatalf("outcome kind = %v (code %q, err %v), want %v", o.Kind, o.Code, o.Err, k)
	}
}

const title = `{"title":"Cannot sign in"}`

// Run runs the conformance suite once at each of Shifts.
func Run(t *testing.T, h Harness) {
	for _, sh := range Shifts {
		t.Run(sh.Name, func(t *testing.T) {
			run(t, h, time.Now().UTC().Truncate(time.Second).Add(sh.By))
		})
	}
}

// run is the suite with the tests' clock starting at start.
func run(t *testing.T, h Harness, start time.Time) {
	open := func(t *testing.T, policy opkey.Policy) (*Env, func(*testing.T) Adapter) {
		e := &Env{T: t, Now: start}
		s, reopen := h.Open(t, e.Clock)
		e.serve(s, policy)
		return e, reopen
	}
	env := func(t *testing.T, policy opkey.Policy) *Env {
		e, _ := open(t, policy)
		return e
	}
	policySwitch(t, env)

	t.Run("created then repeat returns the stored ticket", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		first := e.Create("user-a", "r1", title)
		Want(t, first, core.KindCreated)
		second := e.Create("user-a", "r1", title)
		Want(t, second, core.KindDuplicate)
		if second.TicketID() != first.TicketID() {
			t.Fatalf("repeat ticket %q, want %q", second.TicketID(), first.TicketID())
		}
		if n := e.Tickets(); n != 1 {
			t.Fatalf("tickets = %d, want 1", n)
		}
	})

	t.Run("key order does not matter", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		first := e.Create("user-a", "r1", `{"title":"T","priority":"high"}`)
		second := e.Create("user-a", "r1", `{ "priority" : "high", "title":"T"}`)
		Want(t, second, core.KindDuplicate)
		if second.TicketID() != first.TicketID() || e.Tickets() != 1 {
			t.Fatalf("key-order variant made a second ticket")
		}
	})

	t.Run("policy arguments: changed arguments are a new operation", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		first := e.Create("user-a", "r1", title)
		second := e.Create("user-a", "r1", `{"title":"Cannot sign in either"}`)
		Want(t, second, core.KindCreated)
		if second.TicketID() == first.TicketID() || e.Tickets() != 2 {
			t.Fatalf("changed arguments did not create a new ticket")
		}
	})

	t.Run("policy request: changed arguments are refused, nothing written", func(t *testing.T) {
		e := env(t, opkey.PolicyRequest)
		first := e.Create("user-a", "r1", title)
		Want(t, first, core.KindCreated)
		second := e.Create("user-a", "r1", `{"title":"Another title"}`)
		Want(t, second, core.KindRejected)
		if second.Code != core.CodeArgumentsMismatch {
			t.Fatalf("code = %q, want arguments_mismatch", second.Code)
		}
		third := e.Create("user-a", "r1", title)
		Want(t, third, core.KindDuplicate)
		if third.TicketID() != first.TicketID() || e.Tickets() != 1 {
			t.Fatalf("tickets = %d, want 1 with the first id", e.Tickets())
		}
	})

	t.Run("tenant isolation: same request in two tenants is two operations", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		a := e.Create("user-a", "shared", title)
		b := e.Create("user-b", "shared", title)
		Want(t, a, core.KindCreated)
		Want(t, b, core.KindCreated)
		if a.TicketID() == b.TicketID() || a.Key == b.Key || e.Tickets() != 2 {
			t.Fatalf("tenants share an operation")
		}
		if got := e.Get("user-b", a.TicketID()); got.Code != core.CodeTicketNotFound {
			t.Fatalf("tenant-b read tenant-a's ticket: %+v", got)
		}
		if got := e.Get("user-a", "no-such-ticket"); got.Code != core.CodeTicketNotFound {
			t.Fatalf("missing ticket: %+v", got)
		}
		found := e.Get("user-c", a.TicketID()) // same tenant, other user
		Want(t, found, core.KindFound)
		if found.Ticket.Title != "Cannot sign in" || found.Ticket.Priority != "normal" {
			t.Fatalf("get_ticket = %+v", found.Ticket)
		}
	})

	t.Run("request_id of another user of the tenant: 403, nothing disclosed", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		Want(t, e.Create("user-a", "r1", title), core.KindCreated)
		o := e.Create("user-c", "r1", title)
		Want(t, o, core.KindConflict)
		if o.Result != nil || e.Tickets() != 1 {
			t.Fatalf("conflict disclosed or wrote: %+v", o)
		}
	})

	t.Run("pending operation is never re-executed", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		canonical, _ := opkey.Canonical([]byte(title))
		key, fp := opkey.Key(opkey.PolicyArguments, "tenant-a", "r-pending", core.CreateTicket, canonical)
		must(t, e.Store.PutOperation(context.Background(), core.Operation{
			Key: key, State: core.StatePending, TenantID: "tenant-a", UserID: "alice",
			Function: core.CreateTicket, Fingerprint: fp, CreatedAt: e.Now, ExpiresAt: e.Now.Add(time.Hour),
		}))
		for i := 0; i < 3; i++ {
			Want(t, e.Create("user-a", "r-pending", title), core.KindInProgress)
		}
		if n := e.Tickets(); n != 0 {
			t.Fatalf("pending operation re-executed: %d tickets", n)
		}
	})

	t.Run("expired but present operation is reclaimed once, old ticket stays", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		first := e.Create("user-a", "r1", title)
		Want(t, first, core.KindCreated)
		e.Now = e.Now.Add(24*time.Hour + time.Second) // past the retention, TTL not run
		second := e.Create("user-a", "r1", title)
		Want(t, second, core.KindCreated)
		third := e.Create("user-a", "r1", title)
		Want(t, third, core.KindDuplicate)
		if third.TicketID() != second.TicketID() || second.TicketID() == first.TicketID() {
			t.Fatalf("reclaim: first %s second %s third %s", first.TicketID(), second.TicketID(), third.TicketID())
		}
		if n := e.Tickets(); n != 2 {
			t.Fatalf("tickets = %d, want 2 (the old one stays)", n)
		}
		Want(t, e.Get("user-a", first.TicketID()), core.KindFound)
	})

	t.Run("key still inside the window deduplicates", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		first := e.Create("user-a", "r1", title)
		e.Now = e.Now.Add(24*time.Hour - time.Second)
		second := e.Create("user-a", "r1", title)
		Want(t, second, core.KindDuplicate)
		if second.TicketID() != first.TicketID() {
			t.Fatalf("deduplicated to another ticket")
		}
	})

	t.Run("failure inside the transaction leaves nothing", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		taken := e.Create("user-a", "r-taken", title)
		Want(t, taken, core.KindCreated)
		// The next ticket id collides with the existing ticket, so the
		// ticket Put fails inside the transaction, after the claim.
		newID := e.Svc.NewID
		e.Svc.NewID = func() string { return taken.TicketID() }
		failed := e.Create("user-a", "r-new", title)
		// SQLite reports the broken constraint (500); DynamoDB can only read
		// the ticket's failed condition as an earlier attempt of its own that
		// committed, an unknown outcome (busy). Neither writes.
		if failed.Kind != core.KindInternal && failed.Kind != core.KindBusy {
			Want(t, failed, core.KindInternal)
		}
		e.Svc.NewID = newID
		if n := e.Tickets(); n != 1 {
			t.Fatalf("tickets = %d after a failed transaction, want 1", n)
		}
		// The claim was rolled back: the same call now creates.
		again := e.Create("user-a", "r-new", title)
		Want(t, again, core.KindCreated)
	})

	t.Run("ambiguous: committed but answered busy, the retry returns the stored ticket", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		e.Svc.Store = commitThenFail{e.Store}
		Want(t, e.Create("user-a", "r-amb", title), core.KindBusy)
		e.Svc.Store = e.Store
		retry := e.Create("user-a", "r-amb", title)
		Want(t, retry, core.KindDuplicate)
		if n := e.Tickets(); n != 1 {
			t.Fatalf("tickets = %d, want 1", n)
		}
	})

	t.Run("ambiguous: busy before the write, the retry creates exactly one", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		e.Svc.Store = failBefore{e.Store}
		Want(t, e.Create("user-a", "r-amb", title), core.KindBusy)
		if n := e.Tickets(); n != 0 {
			t.Fatalf("tickets = %d after a failure before the transaction, want 0", n)
		}
		e.Svc.Store = e.Store
		Want(t, e.Create("user-a", "r-amb", title), core.KindCreated)
		Want(t, e.Create("user-a", "r-amb", title), core.KindDuplicate)
		if n := e.Tickets(); n != 1 {
			t.Fatalf("tickets = %d, want 1", n)
		}
	})

	t.Run("cancelled context answers busy on the real store, writes nothing", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		o := e.Svc.Answer(ctx, core.Call{Function: core.CreateTicket, Content: json.RawMessage(title),
			ExternalUserID: "user-a", RequestID: "r-cancel"})
		Want(t, o, core.KindBusy)
		if n := e.Tickets(); n != 0 {
			t.Fatalf("tickets = %d, want 0", n)
		}
		Want(t, e.Create("user-a", "r-cancel", title), core.KindCreated)
	})

	t.Run("restart returns the saved result", func(t *testing.T) {
		e, reopen := open(t, opkey.PolicyArguments)
		first := e.Create("user-a", "r1", title)
		Want(t, first, core.KindCreated)
		e2 := &Env{T: t, Now: e.Now}
		e2.serve(reopen(t), opkey.PolicyArguments)
		second := e2.Create("user-a", "r1", title)
		Want(t, second, core.KindDuplicate)
		if second.TicketID() != first.TicketID() {
			t.Fatalf("after restart: %s, want %s", second.TicketID(), first.TicketID())
		}
	})

	t.Run("10 concurrent identical callbacks make exactly one ticket", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		counts := Concurrent(t, e, 10, func(int) (string, string) { return "r-conc", title })
		if counts[core.KindCreated] != 1 || counts[core.KindDuplicate] != 9 {
			t.Fatalf("outcomes = %v, want 1 created, 9 deduplicated", counts)
		}
		if n := e.Tickets(); n != 1 {
			t.Fatalf("tickets = %d, want 1", n)
		}
	})

	t.Run("two racing reclaimers of an expired key make one new ticket", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		Want(t, e.Create("user-a", "r1", title), core.KindCreated)
		e.Now = e.Now.Add(25 * time.Hour)
		counts := Concurrent(t, e, 2, func(int) (string, string) { return "r1", title })
		if counts[core.KindCreated] != 1 || counts[core.KindDuplicate] != 1 || e.Tickets() != 2 {
			t.Fatalf("outcomes = %v, tickets = %d; want 1 created, 1 deduplicated, 2 tickets", counts, e.Tickets())
		}
	})
}

// RunPolicySwitch runs the suite's cases of a key_policy change between a
// call and its repeat alone, on a store that cannot run the whole suite
// (one that keeps nothing across a restart and reads no context).
func RunPolicySwitch(t *testing.T, h Harness) {
	start := time.Now().UTC().Truncate(time.Second)
	policySwitch(t, func(t *testing.T, policy opkey.Policy) *Env {
		e := &Env{T: t, Now: start}
		s, _ := h.Open(t, e.Clock)
		e.serve(s, policy)
		return e
	})
}

// policySwitch is the suite's cases of a key_policy change on a live
// stack: a repeat finds its operation whichever policy claimed it, so
// each ends with one ticket per operation.
func policySwitch(t *testing.T, env func(t *testing.T, policy opkey.Policy) *Env) {
	t.Helper()
	for _, from := range []opkey.Policy{opkey.PolicyArguments, opkey.PolicyRequest} {
		t.Run(fmt.Sprintf("key_policy switched from %s to %s between a call and its repeat: one ticket, the repeat deduplicated", from, from.Other()), func(t *testing.T) {
			e := env(t, from)
			first := e.Create("user-a", "r-switch", `{"title":"T","priority":"high"}`)
			Want(t, first, core.KindCreated)
			e.Svc.Policy = from.Other()
			second := e.Create("user-a", "r-switch", `{ "priority" : "high", "title":"T"}`)
			Want(t, second, core.KindDuplicate)
			if second.TicketID() != first.TicketID() {
				t.Fatalf("repeat ticket %q, want the first %q", second.TicketID(), first.TicketID())
			}
			if n := e.Tickets(); n != 1 {
				t.Fatalf("tickets = %d, want 1", n)
			}
		})
	}

	t.Run("key_policy switched from request to arguments: the same request_id with other arguments creates its own ticket", func(t *testing.T) {
		e := env(t, opkey.PolicyRequest)
		first := e.Create("user-a", "r-switch", title)
		Want(t, first, core.KindCreated)
		e.Svc.Policy = opkey.PolicyArguments
		other := e.Create("user-a", "r-switch", `{"title":"Another title"}`)
		Want(t, other, core.KindCreated) // not blocked, not replayed
		if other.TicketID() == first.TicketID() {
			t.Fatalf("other arguments answered with the first ticket %q", first.TicketID())
		}
		again := e.Create("user-a", "r-switch", title)
		Want(t, again, core.KindDuplicate)
		if again.TicketID() != first.TicketID() {
			t.Fatalf("the first arguments answered %q, want the first ticket %q", again.TicketID(), first.TicketID())
		}
		if n := e.Tickets(); n != 2 {
			t.Fatalf("tickets = %d, want 2", n)
		}
	})

	t.Run("old and new instances side by side, one per key_policy, racing on one call: one ticket", func(t *testing.T) {
		e := env(t, opkey.PolicyArguments)
		other := *e.Svc
		other.Policy = opkey.PolicyRequest
		svcs := []*core.Service{e.Svc, &other}
		outs := make([]core.Outcome, 8)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range outs {
			wg.Go(func() {
				<-start
				outs[i] = svcs[i%2].Answer(context.Background(), core.Call{Function: core.CreateTicket,
					Content: json.RawMessage(title), ExternalUserID: "user-a", RequestID: "r-both"})
			})
		}
		close(start)
		wg.Wait()
		counts, ids := map[core.Kind]int{}, map[string]bool{}
		for _, o := range outs {
			counts[o.Kind]++
			ids[o.TicketID()] = true
		}
		if counts[core.KindCreated] != 1 || counts[core.KindDuplicate] != 7 || len(ids) != 1 {
			t.Fatalf("outcomes %v with ticket ids %v, want 1 created and 7 deduplicated, one ticket id", counts, ids)
		}
		if n := e.Tickets(); n != 1 {
			t.Fatalf("tickets = %d, want 1", n)
		}
	})
}

// Concurrent sends n create_ticket calls at once (user-a) and counts the
// outcome kinds. Every duplicate must carry the ticket id that the created
// outcome of the same request carried.
func Concurrent(t *testing.T, e *Env, n int, call func(i int) (requestID, content string)) map[core.Kind]int {
	t.Helper()
	outs := make([]core.Outcome, n)
	rids := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		rid, content := call(i)
		rids[i] = rid
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs[i] = e.Create("user-a", rid, content)
		}()
	}
	close(start)
	wg.Wait()
	counts := map[core.Kind]int{}
	created := map[string]string{}
	for i, o := range outs {
		counts[o.Kind]++
		if o.Kind == core.KindCreated {
			created[rids[i]] = o.TicketID()
		}
		if o.Kind == core.KindInternal {
			t.Errorf("internal error: %v", o.Err)
		}
	}
	for i, o := range outs {
		if o.Kind == core.KindDuplicate && created[rids[i]] != "" && o.TicketID() != created[rids[i]] {
			t.Errorf("request %s: duplicate answered %s, created %s", rids[i], o.TicketID(), created[rids[i]])
		}
	}
	return counts
}

// commitThenFail commits through the real store, then reports a timeout:
// the write happened but the caller cannot know it.
type commitThenFail struct{ core.Store }

func (s commitThenFail) Create(ctx context.Context, op core.Operation, t core.Ticket, now time.Time) (*core.Operation, error) {
	if _, err := s.Store.Create(ctx, op, t, now); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: injected timeout after commit", core.ErrBusy)
}

// failBefore calls the real store with a deadline that has already
// passed, as a callback whose time ran out before its transaction began:
// the adapter must answer busy and write nothing.
type failBefore struct{ core.Store }

func (s failBefore) Create(ctx context.Context, op core.Operation, t core.Ticket, now time.Time) (*core.Operation, error) {
	ctx, cancel := context.WithDeadline(ctx, time.Unix(0, 0))
	defer cancel()
	return s.Store.Create(ctx, op, t, now)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
