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

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/idemtest"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

// Adapter is what the suite needs of an adapter beyond core.Store.
type Adapter interface {
	core.Store
	// PutOperation writes an operation as is (pending or expired records).
	PutOperation(ctx context.Context, op idem.Record) error
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
func NewEnv(t *testing.T, s Adapter, policy idem.Policy) *Env {
	e := &Env{T: t, Now: time.Now().UTC().Truncate(time.Second)}
	e.serve(s, policy)
	return e
}

// Clock reads e.Now: the clock to give a store that reads one of its own.
func (e *Env) Clock() time.Time { return e.Now }

func (e *Env) serve(s Adapter, policy idem.Policy) {
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

// restart makes e's service anew over store under policy, as a process
// restarted with another store wrapper or key policy does: a Service
// builds its Guard once.
func (e *Env) restart(store core.Store, policy idem.Policy) {
	old := e.Svc
	e.Svc = &core.Service{Store: store, Users: old.Users, Policy: policy, Retention: old.Retention, Now: old.Now,
		NewID: old.NewID, Deliver: old.Deliver, Tools: old.Tools, Cache: old.Cache}
}

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

// Replays fails t unless got answers a repeat of first: deduplicated,
// with first's ticket.
func Replays(t *testing.T, got, first core.Outcome) {
	t.Helper()
	Want(t, got, core.KindDuplicate)
	if coretest.TicketID(got) != coretest.TicketID(first) {
		t.Fatalf("repeat ticket %q, want the first %q", coretest.TicketID(got), coretest.TicketID(first))
	}
}

// WantTickets fails t unless the store holds n tickets.
func (e *Env) WantTickets(t *testing.T, n int) {
	t.Helper()
	if got := e.Tickets(); got != n {
		t.Fatalf("tickets = %d, want %d", got, n)
	}
}

const title = `{"title":"Cannot sign in"}`

// Run runs package idem's conformance suite on the store's claims (the
// claim rules: replay, in progress, conflict, mismatch, expiry, busy,
// refused and invalid records, restart, concurrency), then the product's
// own cases once at each of Shifts: tickets, their reads across tenants,
// the old ticket of a reclaimed key, and the answer to a refused write.
func Run(t *testing.T, h Harness) {
	t.Run("claims", func(t *testing.T) { idemtest.Run(t, claimsFixture(h)) })
	t.Run("faults", func(t *testing.T) { RunFaults(t, h) })
	for _, sh := range Shifts {
		t.Run(sh.Name, func(t *testing.T) {
			run(t, h, time.Now().UTC().Truncate(time.Second).Add(sh.By))
		})
	}
}

// run is the suite with the tests' clock starting at start.
func run(t *testing.T, h Harness, start time.Time) {
	open := func(t *testing.T, policy idem.Policy) (*Env, func(*testing.T) Adapter) {
		e := &Env{T: t, Now: start}
		s, reopen := h.Open(t, e.Clock)
		e.serve(s, policy)
		return e, reopen
	}
	env := func(t *testing.T, policy idem.Policy) *Env {
		e, _ := open(t, policy)
		return e
	}
	policySwitch(t, env)

	t.Run("created then repeat returns the stored ticket", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		first := e.Create("user-a", "r1", title)
		Want(t, first, core.KindCreated)
		second := e.Create("user-a", "r1", title)
		Replays(t, second, first)
		e.WantTickets(t, 1)
	})

	t.Run("policy arguments: changed arguments are a new operation", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		first := e.Create("user-a", "r1", title)
		second := e.Create("user-a", "r1", `{"title":"Cannot sign in either"}`)
		Want(t, second, core.KindCreated)
		if coretest.TicketID(second) == coretest.TicketID(first) || e.Tickets() != 2 {
			t.Fatalf("changed arguments did not create a new ticket")
		}
	})

	t.Run("policy request: changed arguments are refused, nothing written", func(t *testing.T) {
		e := env(t, idem.PolicyRequest)
		first := e.Create("user-a", "r1", title)
		Want(t, first, core.KindCreated)
		second := e.Create("user-a", "r1", `{"title":"Another title"}`)
		Want(t, second, core.KindRejected)
		if second.Code != core.CodeArgumentsMismatch {
			t.Fatalf("code = %q, want arguments_mismatch", second.Code)
		}
		third := e.Create("user-a", "r1", title)
		Want(t, third, core.KindDuplicate)
		if coretest.TicketID(third) != coretest.TicketID(first) || e.Tickets() != 1 {
			t.Fatalf("tickets = %d, want 1 with the first id", e.Tickets())
		}
	})

	t.Run("tenant isolation: same request in two tenants is two operations", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		a := e.Create("user-a", "shared", title)
		b := e.Create("user-b", "shared", title)
		Want(t, a, core.KindCreated)
		Want(t, b, core.KindCreated)
		if coretest.TicketID(a) == coretest.TicketID(b) || a.Key == b.Key || e.Tickets() != 2 {
			t.Fatalf("tenants share an operation")
		}
		if got := e.Get("user-b", coretest.TicketID(a)); got.Code != core.CodeTicketNotFound {
			t.Fatalf("tenant-b read tenant-a's ticket: %+v", got)
		}
		if got := e.Get("user-a", "no-such-ticket"); got.Code != core.CodeTicketNotFound {
			t.Fatalf("missing ticket: %+v", got)
		}
		found := e.Get("user-c", coretest.TicketID(a)) // same tenant, other user
		Want(t, found, core.KindFound)
		if tk := coretest.FoundTicket(found); tk == nil || tk.Title != "Cannot sign in" || tk.Priority != "normal" {
			t.Fatalf("get_ticket = %s", found.Body)
		}
	})

	t.Run("expired but present operation is reclaimed once, old ticket stays", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		first := e.Create("user-a", "r1", title)
		Want(t, first, core.KindCreated)
		e.Now = e.Now.Add(24*time.Hour + time.Second) // past the retention, TTL not run
		second := e.Create("user-a", "r1", title)
		Want(t, second, core.KindCreated)
		third := e.Create("user-a", "r1", title)
		Want(t, third, core.KindDuplicate)
		if coretest.TicketID(third) != coretest.TicketID(second) || coretest.TicketID(second) == coretest.TicketID(first) {
			t.Fatalf("reclaim: first %s second %s third %s", coretest.TicketID(first), coretest.TicketID(second), coretest.TicketID(third))
		}
		e.WantTickets(t, 2)
		Want(t, e.Get("user-a", coretest.TicketID(first)), core.KindFound)
	})

}

// claimsFixture is idemtest's Fixture over the store's claims: an effect
// is a ticket, and a refused write is a ticket whose id a ticket written
// when the storage was opened already holds.
func claimsFixture(h Harness) func(t *testing.T, now func() time.Time) idemtest.Fixture[core.Writes] {
	return func(t *testing.T, now func() time.Time) idemtest.Fixture[core.Writes] {
		s, reopen := h.Open(t, now)
		ticket := func(id string) core.Ticket {
			return core.Ticket{ID: id, TenantID: "tenant-a", UserID: "alice", OperationKey: "k-" + id,
				Arguments: title, CreatedAt: now()}
		}
		at := now()
		if _, err := s.Claims().Claim(context.Background(), idem.Record{Key: "taken", State: idem.StateCompleted,
			Tenant: "tenant-a", Owner: "alice", Function: core.CreateTicket, Fingerprint: "f", Result: []byte(`{}`),
			CreatedAt: at, ExpiresAt: at.Add(time.Hour)}, core.Writes{Tickets: []core.Ticket{ticket("taken")}}, at); err != nil {
			t.Fatalf("the taken ticket: %v", err)
		}
		return idemtest.Fixture[core.Writes]{
			Store:  s.Claims(),
			Write:  func(id string) core.Writes { return core.Writes{Tickets: []core.Ticket{ticket(id)}} },
			Refuse: func() core.Writes { return core.Writes{Tickets: []core.Ticket{ticket("taken")}} },
			Effects: func(t *testing.T) int {
				return count(t, s) - 1 // the taken ticket is the fixture's
			},
			Reopen: func(t *testing.T) idem.Store[core.Writes] {
				s = reopen(t)
				return s.Claims()
			},
		}
	}
}

// RunPolicySwitch runs the suite's cases of a key_policy change between a
// call and its repeat alone, on a store that cannot run the whole suite
// (one that keeps nothing across a restart and reads no context).
func RunPolicySwitch(t *testing.T, h Harness) {
	start := time.Now().UTC().Truncate(time.Second)
	policySwitch(t, func(t *testing.T, policy idem.Policy) *Env {
		e := &Env{T: t, Now: start}
		s, _ := h.Open(t, e.Clock)
		e.serve(s, policy)
		return e
	})
}

// policySwitch is the suite's cases of a key_policy change on a live
// stack: a repeat finds its operation whichever policy claimed it, so
// each ends with one ticket per operation.
func policySwitch(t *testing.T, env func(t *testing.T, policy idem.Policy) *Env) {
	t.Helper()
	for _, from := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
		t.Run(fmt.Sprintf("key_policy switched from %s to %s between a call and its repeat: one ticket, the repeat deduplicated", from, from.Other()), func(t *testing.T) {
			e := env(t, from)
			first := e.Create("user-a", "r-switch", `{"title":"T","priority":"high"}`)
			Want(t, first, core.KindCreated)
			e.restart(e.Svc.Store, from.Other())
			second := e.Create("user-a", "r-switch", `{ "priority" : "high", "title":"T"}`)
			Replays(t, second, first)
			e.WantTickets(t, 1)
		})
	}

	t.Run("key_policy switched from request to arguments: the same request_id with other arguments creates its own ticket", func(t *testing.T) {
		e := env(t, idem.PolicyRequest)
		first := e.Create("user-a", "r-switch", title)
		Want(t, first, core.KindCreated)
		e.restart(e.Svc.Store, idem.PolicyArguments)
		other := e.Create("user-a", "r-switch", `{"title":"Another title"}`)
		Want(t, other, core.KindCreated) // not blocked, not replayed
		if coretest.TicketID(other) == coretest.TicketID(first) {
			t.Fatalf("other arguments answered with the first ticket %q", coretest.TicketID(first))
		}
		again := e.Create("user-a", "r-switch", title)
		Replays(t, again, first)
		e.WantTickets(t, 2)
	})

	t.Run("old and new instances side by side, one per key_policy, racing on one call: one ticket", func(t *testing.T) {
		e := env(t, idem.PolicyArguments)
		old := e.Svc
		e.restart(e.Svc.Store, idem.PolicyRequest)
		svcs := []*core.Service{old, e.Svc}
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
			ids[coretest.TicketID(o)] = true
		}
		if counts[core.KindCreated] != 1 || counts[core.KindDuplicate] != 7 || len(ids) != 1 {
			t.Fatalf("outcomes %v with ticket ids %v, want 1 created and 7 deduplicated, one ticket id", counts, ids)
		}
		e.WantTickets(t, 1)
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
			created[rids[i]] = coretest.TicketID(o)
		}
		if o.Kind == core.KindInternal {
			t.Errorf("internal error: %v", o.Err)
		}
	}
	for i, o := range outs {
		if o.Kind == core.KindDuplicate && created[rids[i]] != "" && coretest.TicketID(o) != created[rids[i]] {
			t.Errorf("request %s: duplicate answered %s, created %s", rids[i], coretest.TicketID(o), created[rids[i]])
		}
	}
	return counts
}

// commitThenFail commits through the real store, then reports a timeout:
// the write happened but the caller cannot know it.
type commitThenFail struct{ core.Store }

func (s commitThenFail) Claims() idem.Store[core.Writes] { return core.ClaimFunc(s.claim) }

func (s commitThenFail) claim(ctx context.Context, op idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	if _, err := s.Store.Claims().Claim(ctx, op, w, now); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: injected timeout after commit", core.ErrBusy)
}
