// Package deliverytest is the conformance suite every delivery.Outbox
// passes, run on each real store (SQLite on a temp file, DynamoDB Local)
// and on the in-memory one: tickets are created through core.Service, so
// the outbox written by the callback's transaction is checked too. Kill
// runs a real worker process on the store and kills it around its send.
// The suite uses no helpdesk adapter: its destinations are its own; the
// failure matrix over the real adapters is package matrixtest.
package deliverytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

// Adapter is the store under the suite: it takes callbacks, delivers their
// tickets and lets a person settle them.
type Adapter interface {
	core.Store
	delivery.Outbox
	delivery.Admin
}

// Harness opens a store on fresh, empty storage.
type Harness struct {
	Open func(t *testing.T) Adapter
	// Corrupt, when set, overwrites a stored field of ticket id other than
	// its arguments (raw SQL, PutItem) with text that does not parse, as a
	// bad hand edit or a damaged file would.
	Corrupt func(t *testing.T, s Adapter, id string)
}

// Env creates tickets through the real service over a store.
type Env struct {
	T     *testing.T
	Store Adapter
	Now   time.Time
	svc   *core.Service
	seq   atomic.Int64
	run   string
}

// User is the one caller the suite's service knows: tenant-a's alice.
const User = "user-a"

var users = memstore.Users{User: {TenantID: "tenant-a", UserID: "alice"}}

// NewService is a service over s that knows User alone, keys operations
// by their arguments, keeps them an hour and names tickets with newID;
// deliver says whether a destination is configured.
func NewService(s core.Store, deliver bool, newID func() string) *core.Service {
	return &core.Service{Store: s, Users: users, Policy: idem.PolicyArguments, Retention: time.Hour,
		Deliver: deliver, NewID: newID}
}

// NewEnv returns an Env over s whose clock moves only when the test moves
// it, starting a quarter second into the current second (so that rounding
// to whole seconds shows); deliver says whether a destination is
// configured. The start is today's, never a fixed date: the kill test's
// child worker and DynamoDB run on the real clock.
func NewEnv(t *testing.T, s Adapter, deliver bool) *Env {
	e := &Env{T: t, Store: s, Now: time.Now().UTC().Truncate(time.Second).Add(250 * time.Millisecond),
		run: fmt.Sprintf("%x", time.Now().UnixNano())}
	e.svc = NewService(s, deliver, func() string { return fmt.Sprintf("dt-%s-%d", e.run, e.seq.Add(1)) })
	e.svc.Now = func() time.Time { return e.Now }
	return e
}

// Create makes one ticket through create_ticket and returns its id.
func (e *Env) Create(content string) string {
	e.T.Helper()
	out := e.svc.Answer(context.Background(), core.Call{Function: core.CreateTicket,
		Content: json.RawMessage(content), ExternalUserID: User,
		RequestID: fmt.Sprintf("req-%s-%d", e.run, e.seq.Add(1))})
	if out.Kind != core.KindCreated {
		e.T.Fatalf("create_ticket: kind %v, err %v", out.Kind, out.Err)
	}
	return coretest.TicketID(out)
}

// Comment adds a comment to ticket through add_comment and returns its
// outbox id (its item key).
func (e *Env) Comment(ticket, body string) string {
	e.T.Helper()
	content, _ := json.Marshal(map[string]string{"ticket_id": ticket, "body": body})
	var r core.CommentResult
	e.write(core.AddComment, content, &r)
	return core.EffectKeyPrefix(core.KindComment) + r.CommentID
}

// CloseTicket closes ticket through close_ticket and returns the close's
// outbox id (its item key), read back from the ticket's follow-ups.
func (e *Env) CloseTicket(ticket, resolution string) string {
	e.T.Helper()
	content, _ := json.Marshal(map[string]string{"ticket_id": ticket, "resolution": resolution})
	var r core.CloseResult
	e.write(core.CloseTicket, content, &r)
	t, err := e.Store.Ticket(context.Background(), ticket)
	if err != nil {
		e.T.Fatal(err)
	}
	list := t.Attrs.List(core.AttrFollowUps)
	if len(list) == 0 {
		e.T.Fatalf("close of %s: no follow-up listed", ticket)
	}
	return list[len(list)-1]
}

// write makes one call of a write tool that must answer created, and
// decodes its answer into v.
func (e *Env) write(fn string, content []byte, v any) {
	e.T.Helper()
	out := e.svc.Answer(context.Background(), core.Call{Function: fn, Content: content, ExternalUserID: User,
		RequestID: fmt.Sprintf("req-%s-%d", e.run, e.seq.Add(1))})
	if out.Kind != core.KindCreated {
		e.T.Fatalf("%s: kind %v, code %s, err %v", fn, out.Kind, out.Code, out.Err)
	}
	if err := json.Unmarshal(out.Body, v); err != nil {
		e.T.Fatal(err)
	}
}

// CreateRaw writes a ticket with the given arguments text straight through
// the store, pending and due now, bypassing the service's checks: how a
// ticket the service could never write (unreadable arguments) is made.
func (e *Env) CreateRaw(arguments string) string {
	e.T.Helper()
	n := e.seq.Add(1)
	id := fmt.Sprintf("dt-%s-raw-%d", e.run, n)
	key := fmt.Sprintf("%032x%032x", time.Now().UnixNano(), n)
	rec := idem.Record{Key: key, State: idem.StateCompleted, Tenant: "tenant-a", Owner: "alice",
		Function: "create_ticket", Fingerprint: key, Result: []byte(`{"status":"created","ticket_id":"` + id + `"}`),
		CreatedAt: e.Now, ExpiresAt: e.Now.Add(time.Hour).Truncate(time.Second)}
	t := core.Ticket{ID: id, TenantID: "tenant-a", UserID: "alice", OperationKey: key, Arguments: arguments, CreatedAt: e.Now,
		Delivery: &core.DeliveryStatus{State: core.DeliveryPending, DueAt: e.Now.Truncate(time.Second)}}
	if existing, err := e.Store.Claims().Claim(context.Background(), rec, core.Writes{Tickets: []core.Ticket{t}}, e.Now); err != nil || existing != nil {
		e.T.Fatalf("create %s: %v (existing %v)", id, err, existing)
	}
	return id
}

// Get answers get_ticket for id.
func (e *Env) Get(id string) *core.TicketView {
	e.T.Helper()
	content, _ := json.Marshal(map[string]string{"ticket_id": id})
	out := e.svc.Answer(context.Background(), core.Call{Function: core.GetTicket, Content: content, ExternalUserID: User})
	if out.Kind != core.KindFound {
		e.T.Fatalf("get_ticket: kind %v, err %v", out.Kind, out.Err)
	}
	return coretest.FoundTicket(out)
}

// Record reads id's delivery record.
func (e *Env) Record(id string) delivery.Record {
	e.T.Helper()
	r, err := e.Store.Delivery(context.Background(), id)
	if err != nil {
		e.T.Fatalf("Delivery(%s): %v", id, err)
	}
	return r
}

// Claim claims id as owner at e.Now with the default lease.
func (e *Env) Claim(id, owner string) (delivery.Claimed, error) {
	return e.Store.Claim(context.Background(), id, owner, e.Now, delivery.CeilSecond(e.Now.Add(delivery.DefaultLease)))
}

// MustClaim claims id as owner as Claim does; the test stops when the
// claim fails.
func (e *Env) MustClaim(id, owner string) {
	e.T.Helper()
	if _, err := e.Claim(id, owner); err != nil {
		e.T.Fatalf("claim %s: %v", id, err)
	}
}

// Release claims id and records it pending until due.
func (e *Env) Release(id string, due time.Time) {
	e.T.Helper()
	e.claimAndRecord(id, delivery.Update{State: delivery.StatePending, Attempts: 1, DueAt: due})
}

// ReleaseUnknown claims id and records it pending until due after one send
// whose outcome is unknown and whose outcome window closed an hour before
// e.Now: the next worker looks it up before anything else.
func (e *Env) ReleaseUnknown(id string, due time.Time) {
	e.T.Helper()
	e.claimAndRecord(id, delivery.Update{State: delivery.StatePending, Attempts: 1, SentUnknown: true,
		SentAt: SentAt(e.Now.Add(-time.Hour)), DueAt: due})
}

// Finish claims id and records it in the final state st (failed or
// unknown after 3 sends, or delivered). An unknown ticket's last unknown
// send started at SentAt(e.Now).
func (e *Env) Finish(id string, st delivery.State) {
	e.T.Helper()
	u := delivery.Update{State: st, Attempts: 3, LookupFailures: 1, SentUnknown: st == delivery.StateUnknown, Error: "send unknown (HTTP 502)"}
	if u.SentUnknown {
		u.SentAt = SentAt(e.Now)
	}
	if st == delivery.StateDelivered {
		u = delivery.Update{State: st, Attempts: 1, ExternalID: "77", DeliveredAt: e.Now}
	}
	e.claimAndRecord(id, u)
}

// SentAt is the send start the suite records for a send made around now:
// a time with milliseconds, 1.5 s before now, as the stores keep it.
func SentAt(now time.Time) time.Time {
	return now.Add(-1500 * time.Millisecond).Truncate(time.Millisecond).Add(7 * time.Millisecond)
}

// claimAndRecord claims id and records u under that claim.
func (e *Env) claimAndRecord(id string, u delivery.Update) {
	e.T.Helper()
	owner := string(u.State) + "-" + id
	e.MustClaim(id, owner)
	if err := e.Store.Record(context.Background(), id, owner, u); err != nil {
		e.T.Fatalf("record %s %s: %v", id, u.State, err)
	}
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	ctx := context.Background()
	runAdmin(t, h)

	t.Run("callback with a destination writes the ticket pending, due at once", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		id := e.Create(`{"title":"Printer on fire","priority":"high"}`)
		r := e.Record(id)
		if r.State != delivery.StatePending || !r.DueAt.Equal(e.Now.Truncate(time.Second)) || r.Attempts != 0 || r.SentUnknown {
			t.Fatalf("record = %+v", r)
		}
		v := e.Get(id)
		if v.Delivery == nil || *v.Delivery != (core.DeliveryView{State: "pending"}) {
			t.Fatalf("get_ticket delivery = %+v", v.Delivery)
		}
		ids, err := e.Store.Due(ctx, e.Now, 10)
		if err != nil || len(ids) != 1 || ids[0] != id {
			t.Fatalf("Due = %v, %v", ids, err)
		}
	})

	t.Run("callback without a destination writes no delivery state", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), false)
		id := e.Create(`{"title":"Printer on fire"}`)
		if _, err := e.Store.Delivery(ctx, id); !errors.Is(err, delivery.ErrNoRecord) {
			t.Fatalf("Delivery: %v, want ErrNoRecord", err)
		}
		if v := e.Get(id); v.Delivery != nil {
			t.Fatalf("get_ticket delivery = %+v, want none", v.Delivery)
		}
		if _, err := e.Claim(id, "w"); !errors.Is(err, delivery.ErrNotClaimable) {
			t.Fatalf("Claim: %v, want ErrNotClaimable", err)
		}
		if ids, err := e.Store.Due(ctx, e.Now.Add(time.Hour), 10); err != nil || len(ids) != 0 {
			t.Fatalf("Due = %v, %v", ids, err)
		}
	})

	t.Run("claim returns the ticket to send and the record before it", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		id := e.Create(`{"title":"Printer on fire","description":"Third floor"}`)
		c, err := e.Claim(id, "w1")
		if err != nil {
			t.Fatal(err)
		}
		want := delivery.HelpdeskTicket{ID: id, TenantID: "tenant-a", UserID: "alice", Title: "Printer on fire",
			Description: "Third floor", Priority: "normal", OperationKey: c.Ticket.OperationKey}
		got := c.Ticket
		got.CreatedAt = time.Time{}
		if got != want || len(c.Ticket.OperationKey) != 64 || !c.Ticket.CreatedAt.Equal(e.Now) {
			t.Fatalf("ticket = %+v, want %+v created %v", c.Ticket, want, e.Now)
		}
		if c.Before.State != delivery.StatePending {
			t.Fatalf("before = %+v", c.Before)
		}
		r := e.Record(id)
		if r.State != delivery.StateDelivering || r.LeaseOwner != "w1" ||
			!r.LeaseUntil.Equal(delivery.CeilSecond(e.Now.Add(delivery.DefaultLease))) {
			t.Fatalf("record after claim = %+v", r)
		}
		if v := e.Get(id); v.Delivery == nil || v.Delivery.State != "delivering" {
			t.Fatalf("get_ticket delivery = %+v", v.Delivery)
		}
	})

	t.Run("claim race: of two claimers exactly one wins", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		for round := range 3 {
			id := e.Create(fmt.Sprintf(`{"title":"race %d"}`, round))
			wins, lost := Race(t, 2, func(w int) error {
				_, err := e.Claim(id, fmt.Sprintf("w%d", w))
				return err
			})
			if wins != 1 || lost != 1 {
				t.Fatalf("round %d: %d wins, %d lost; want 1 and 1", round, wins, lost)
			}
		}
	})

	t.Run("lease expiry: taken over only once the lease ran out", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		id := e.Create(`{"title":"lease"}`)
		e.MustClaim(id, "w1")
		lease := e.Record(id).LeaseUntil
		e.Now = lease // the lease still holds during its last second
		if _, err := e.Claim(id, "w2"); !errors.Is(err, delivery.ErrNotClaimable) {
			t.Fatalf("claim under the lease: %v, want ErrNotClaimable", err)
		}
		if ids, _ := e.Store.Due(ctx, e.Now.Add(-time.Second), 10); len(ids) != 0 {
			t.Fatalf("Due under the lease = %v", ids)
		}
		e.Now = lease.Add(time.Second)
		if ids, _ := e.Store.Due(ctx, e.Now, 10); len(ids) != 1 || ids[0] != id {
			t.Fatalf("Due after the lease = %v, want [%s]", ids, id)
		}
		c, err := e.Claim(id, "w2")
		if err != nil {
			t.Fatalf("takeover: %v", err)
		}
		if c.Before.State != delivery.StateDelivering || c.Before.LeaseOwner != "w1" {
			t.Fatalf("before takeover = %+v", c.Before)
		}
		// The first owner's result is refused; the second's is recorded.
		if err := e.Store.Record(ctx, id, "w1", delivery.Update{State: delivery.StateDelivered, ExternalID: "1"}); !errors.Is(err, delivery.ErrLeaseLost) {
			t.Fatalf("Record by the old owner: %v, want ErrLeaseLost", err)
		}
		if r := e.Record(id); r.State != delivery.StateDelivering || r.LeaseOwner != "w2" {
			t.Fatalf("record after the refused write = %+v", r)
		}
		if err := e.Store.Record(ctx, id, "w2", delivery.Update{State: delivery.StateDelivered, Attempts: 1,
			ExternalID: "42", ExternalURL: "https://h.test/42", DeliveredAt: e.Now}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("record needs the lease: unclaimed, final or another owner's ticket refuses it", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		id := e.Create(`{"title":"record"}`)
		u := delivery.Update{State: delivery.StateFailed, Attempts: 1, Error: "x"}
		if err := e.Store.Record(ctx, id, "w1", u); !errors.Is(err, delivery.ErrLeaseLost) {
			t.Fatalf("Record on pending: %v, want ErrLeaseLost", err)
		}
		if err := e.Store.Record(ctx, "no-such-ticket", "w1", u); !errors.Is(err, delivery.ErrLeaseLost) {
			t.Fatalf("Record on a missing ticket: %v, want ErrLeaseLost", err)
		}
		e.MustClaim(id, "w1")
		if err := e.Store.Record(ctx, id, "w2", u); !errors.Is(err, delivery.ErrLeaseLost) {
			t.Fatalf("Record by another owner: %v, want ErrLeaseLost", err)
		}
		if err := e.Store.Record(ctx, id, "w1", u); err != nil {
			t.Fatal(err)
		}
		if err := e.Store.Record(ctx, id, "w1", u); !errors.Is(err, delivery.ErrLeaseLost) {
			t.Fatalf("second Record after the final one: %v, want ErrLeaseLost", err)
		}
		r := e.Record(id)
		if r.State != delivery.StateFailed || r.Error != "x" || r.Attempts != 1 || !r.DueAt.IsZero() {
			t.Fatalf("record = %+v", r)
		}
		// Final: never due, never claimable again.
		if ids, _ := e.Store.Due(ctx, e.Now.Add(24*time.Hour), 10); len(ids) != 0 {
			t.Fatalf("Due = %v", ids)
		}
		e.Now = e.Now.Add(time.Hour)
		if _, err := e.Claim(id, "w3"); !errors.Is(err, delivery.ErrNotClaimable) {
			t.Fatalf("Claim on failed: %v", err)
		}
	})

	t.Run("release keeps the record and the due time", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		id := e.Create(`{"title":"release"}`)
		e.MustClaim(id, "w1")
		due := e.Now.Truncate(time.Second).Add(90 * time.Second)
		u := delivery.Update{State: delivery.StatePending, Attempts: 3, LookupFailures: 2, SentUnknown: true, DueAt: due, Error: "send unknown (HTTP 502)"}
		if err := e.Store.Record(ctx, id, "w1", u); err != nil {
			t.Fatal(err)
		}
		r := e.Record(id)
		if r.State != delivery.StatePending || r.Attempts != 3 || r.LookupFailures != 2 || !r.SentUnknown ||
			!r.DueAt.Equal(due) || r.Error != u.Error {
			t.Fatalf("record = %+v", r)
		}
		e.Now = due.Add(-time.Second)
		if _, err := e.Claim(id, "w2"); !errors.Is(err, delivery.ErrNotClaimable) {
			t.Fatalf("claim before due: %v", err)
		}
		e.Now = due
		c, err := e.Claim(id, "w2")
		if err != nil {
			t.Fatalf("claim at due: %v", err)
		}
		if c.Before.Attempts != 3 || !c.Before.SentUnknown || c.Before.LookupFailures != 2 {
			t.Fatalf("before = %+v", c.Before)
		}
	})

	t.Run("waiting counts pending and delivering tickets, not final ones nor tickets without delivery", func(t *testing.T) {
		s := h.Open(t)
		c, ok := s.(delivery.WaitingCounter)
		if !ok {
			t.Fatalf("%T is not a delivery.WaitingCounter", s)
		}
		count := func() int {
			t.Helper()
			n, err := c.Waiting(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count(); n != 0 {
			t.Fatalf("empty store: %d waiting, want 0", n)
		}
		e := NewEnv(t, s, true)
		var ids []string
		for i := range 6 {
			ids = append(ids, e.Create(fmt.Sprintf(`{"title":"waiting %d"}`, i)))
		}
		NewEnv(t, s, false).Create(`{"title":"never delivered"}`)
		if _, err := e.Claim(ids[0], "w"); err != nil { // delivering
			t.Fatal(err)
		}
		e.Release(ids[1], e.Now.Add(time.Hour)) // backing off
		e.Finish(ids[2], delivery.StateDelivered)
		e.Finish(ids[3], delivery.StateFailed)
		e.Finish(ids[4], delivery.StateUnknown)
		if n := count(); n != 3 {
			t.Fatalf("%d waiting, want 3 (one delivering, one backing off, one due)", n)
		}
	})

	t.Run("due tickets come earliest first, only when due", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		base := e.Now.Truncate(time.Second)
		var ids []string
		for i := range 5 {
			ids = append(ids, e.Create(fmt.Sprintf(`{"title":"order %d"}`, i)))
		}
		// Due at base+40, +10, +30, +20 s; the last one is delivered.
		for i, d := range []int{40, 10, 30, 20} {
			e.Release(ids[i], base.Add(time.Duration(d)*time.Second))
		}
		if _, err := e.Claim(ids[4], "w"); err != nil {
			t.Fatal(err)
		}
		if err := e.Store.Record(ctx, ids[4], "w", delivery.Update{State: delivery.StateDelivered, Attempts: 1, ExternalID: "9", DeliveredAt: e.Now}); err != nil {
			t.Fatal(err)
		}
		got, err := e.Store.Due(ctx, base.Add(30*time.Second), 10)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{ids[1], ids[3], ids[2]}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Due = %v, want %v", got, want)
		}
		if got, _ := e.Store.Due(ctx, base.Add(time.Hour), 2); fmt.Sprint(got) != fmt.Sprint([]string{ids[1], ids[3]}) {
			t.Fatalf("Due with limit 2 = %v", got)
		}
		if got, _ := e.Store.Due(ctx, base.Add(9*time.Second), 10); len(got) != 0 {
			t.Fatalf("Due before any = %v", got)
		}
	})

	t.Run("delivered: the ids are kept and get_ticket shows them", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		id := e.Create(`{"title":"delivered"}`)
		e.MustClaim(id, "w")
		at := e.Now.Add(1500 * time.Millisecond)
		if err := e.Store.Record(ctx, id, "w", delivery.Update{State: delivery.StateDelivered, Attempts: 1,
			ExternalID: "8812", ExternalURL: "https://acme.zendesk.test/agent/tickets/8812", DeliveredAt: at}); err != nil {
			t.Fatal(err)
		}
		r := e.Record(id)
		if r.State != delivery.StateDelivered || r.ExternalID != "8812" || !r.DeliveredAt.Equal(at) || !r.DueAt.IsZero() || r.LeaseOwner != "" {
			t.Fatalf("record = %+v", r)
		}
		want := core.DeliveryView{State: "delivered", ExternalID: "8812", ExternalURL: "https://acme.zendesk.test/agent/tickets/8812"}
		if v := e.Get(id); v.Delivery == nil || *v.Delivery != want {
			t.Fatalf("get_ticket delivery = %+v", v.Delivery)
		}
	})

	t.Run("a claimed ticket whose arguments cannot be read ends failed after one step, and is not due again", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		bad := e.CreateRaw(`{"title": not json`)
		good := e.Create(`{"title":"readable"}`)
		dest := &CountingDest{}
		eng := &delivery.Engine{Store: e.Store, Destination: dest, Now: func() time.Time { return e.Now }}
		st, err := eng.Deliver(ctx, bad)
		if err != nil || st != delivery.StateFailed {
			t.Fatalf("Deliver: %s, %v; want failed", st, err)
		}
		r := e.Record(bad)
		if r.State != delivery.StateFailed || r.Attempts != 0 || !r.DueAt.IsZero() || r.LeaseOwner != "" ||
			!strings.Contains(r.Error, "unreadable") || !strings.Contains(r.Error, "invalid character") {
			t.Fatalf("record = %+v", r)
		}
		if n := dest.N.Load(); n != 0 {
			t.Fatalf("sends = %d, want 0", n)
		}
		failed, err := e.Store.List(ctx, delivery.StateFailed, 10)
		if err != nil || len(failed) != 1 || failed[0].TicketID != bad {
			t.Fatalf("failed list = %+v, %v", failed, err)
		}
		// Neither now nor after any lease would have run out.
		for _, at := range []time.Time{e.Now, e.Now.Add(time.Hour)} {
			ids, err := e.Store.Due(ctx, at, 10)
			if err != nil || len(ids) != 1 || ids[0] != good {
				t.Fatalf("Due(%v) = %v, %v; want only [%s]", at, ids, err, good)
			}
		}
		if _, err := eng.Deliver(ctx, bad); !errors.Is(err, delivery.ErrNotClaimable) {
			t.Fatalf("second Deliver: %v, want ErrNotClaimable", err)
		}
	})

	t.Run("a claimed ticket with a stored field that cannot be read ends failed after one step", func(t *testing.T) {
		if h.Corrupt == nil {
			t.Skip("the store keeps no fields apart from the arguments")
		}
		s := h.Open(t)
		e := NewEnv(t, s, true)
		id := e.Create(`{"title":"damaged"}`)
		h.Corrupt(t, s, id)
		dest := &CountingDest{}
		eng := &delivery.Engine{Store: s, Destination: dest, Now: func() time.Time { return e.Now }}
		if st, err := eng.Deliver(ctx, id); err != nil || st != delivery.StateFailed {
			t.Fatalf("Deliver: %s, %v; want failed", st, err)
		}
		if r := e.Record(id); r.State != delivery.StateFailed || !strings.Contains(r.Error, "unreadable") || dest.N.Load() != 0 {
			t.Fatalf("record = %+v after %d sends", r, dest.N.Load())
		}
		if ids, err := s.Due(ctx, e.Now.Add(time.Hour), 10); err != nil || len(ids) != 0 {
			t.Fatalf("Due = %v, %v", ids, err)
		}
	})

	t.Run("the engine delivers every ticket once over the store", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		dest := &CountingDest{}
		eng := &delivery.Engine{Store: e.Store, Destination: dest, Now: func() time.Time { return e.Now }}
		var ids []string
		for i := range 6 {
			ids = append(ids, e.Create(fmt.Sprintf(`{"title":"engine %d"}`, i)))
		}
		// Two workers sweep at once, three tickets at a time each.
		SweepAll(ctx, eng, 2, 3)
		for _, id := range ids {
			if r := e.Record(id); r.State != delivery.StateDelivered || r.ExternalID != "ext-"+id {
				t.Fatalf("%s: %+v", id, r)
			}
		}
		if n := dest.N.Load(); n != int64(len(ids)) {
			t.Fatalf("sends = %d, want %d", n, len(ids))
		}
	})
}

// CountingDest is a destination that creates every ticket it is sent, as
// "ext-" and the ticket id, and counts the sends in N; it has no lookup.
type CountingDest struct{ N atomic.Int64 }

// Send counts the send and answers created.
func (d *CountingDest) Send(_ context.Context, t delivery.HelpdeskTicket) (delivery.Receipt, error) {
	d.N.Add(1)
	return delivery.Receipt{ExternalID: "ext-" + t.ID}, nil
}

// Lookup answers delivery.ErrNoLookup.
func (d *CountingDest) Lookup(context.Context, string) (delivery.Receipt, bool, error) {
	return delivery.Receipt{}, false, delivery.ErrNoLookup
}

// runAdmin checks the operator's store methods: listing by state, and the
// conditional transitions a person makes.
func runAdmin(t *testing.T, h Harness) {
	ctx := context.Background()

	t.Run("list by state: each state's tickets, ordered by id, up to the limit", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		byState := map[delivery.State][]string{}
		for i, st := range []delivery.State{delivery.StateUnknown, delivery.StateFailed, delivery.StateDelivered,
			delivery.StateUnknown, delivery.StatePending, delivery.StateDelivering, delivery.StateUnknown} {
			id := e.Create(fmt.Sprintf(`{"title":"list %d"}`, i))
			switch st {
			case delivery.StatePending:
			case delivery.StateDelivering:
				e.MustClaim(id, "w")
			default:
				e.Finish(id, st)
			}
			byState[st] = append(byState[st], id)
		}
		for st, ids := range byState {
			slices.Sort(ids)
			got, err := e.Store.List(ctx, st, 100)
			if err != nil {
				t.Fatalf("List(%s): %v", st, err)
			}
			var gotIDs []string
			for _, r := range got {
				if r.State != st {
					t.Fatalf("List(%s) returned %+v", st, r)
				}
				gotIDs = append(gotIDs, r.TicketID)
			}
			if !slices.Equal(gotIDs, ids) {
				t.Fatalf("List(%s) = %v, want %v", st, gotIDs, ids)
			}
		}
		got, err := e.Store.List(ctx, delivery.StateUnknown, 2)
		if err != nil || len(got) != 2 || got[0].TicketID != byState[delivery.StateUnknown][0] ||
			got[0].Attempts != 3 || !got[0].SentUnknown || got[0].Error == "" {
			t.Fatalf("List(unknown, 2) = %+v, %v", got, err)
		}
	})

	t.Run("retry: only a failed ticket, back to pending due now with attempts reset", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		failed, unknown, pending := e.Create(`{"title":"r1"}`), e.Create(`{"title":"r2"}`), e.Create(`{"title":"r3"}`)
		e.Finish(failed, delivery.StateFailed)
		e.Finish(unknown, delivery.StateUnknown)
		e.Now = e.Now.Add(time.Hour)
		if err := delivery.Retry(ctx, e.Store, failed, e.Now); err != nil {
			t.Fatal(err)
		}
		r := e.Record(failed)
		if r.State != delivery.StatePending || r.Attempts != 0 || r.LookupFailures != 0 || r.SentUnknown ||
			!r.DueAt.Equal(e.Now.Truncate(time.Second)) || r.Error != "" {
			t.Fatalf("after retry: %+v", r)
		}
		if ids, _ := e.Store.Due(ctx, e.Now, 10); !slices.Contains(ids, failed) {
			t.Fatalf("Due = %v, want %s in it", ids, failed)
		}
		for id, st := range map[string]delivery.State{failed: delivery.StatePending, unknown: delivery.StateUnknown, pending: delivery.StatePending} {
			err := delivery.Retry(ctx, e.Store, id, e.Now)
			var se *delivery.StateError
			if !errors.Is(err, delivery.ErrWrongState) || !errors.As(err, &se) || se.State != st || se.Want != delivery.StateFailed {
				t.Fatalf("Retry(%s %s): %v, want refused naming %s", st, id, err, st)
			}
		}
		if r := e.Record(unknown); r.State != delivery.StateUnknown || r.Attempts != 3 {
			t.Fatalf("a refused retry changed %+v", r)
		}
		if err := delivery.Retry(ctx, e.Store, "no-such-ticket", e.Now); !errors.Is(err, delivery.ErrNoRecord) {
			t.Fatalf("Retry(missing): %v, want ErrNoRecord", err)
		}
		if _, err := e.Claim(failed, "w"); err != nil {
			t.Fatalf("claim after retry: %v", err)
		}
	})

	t.Run("resolve unknown as delivered: ids kept, shown by get_ticket; only from unknown", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		unknown, failed := e.Create(`{"title":"u1"}`), e.Create(`{"title":"u2"}`)
		e.Finish(unknown, delivery.StateUnknown)
		e.Finish(failed, delivery.StateFailed)
		rc := delivery.Receipt{ExternalID: "4410", ExternalURL: "https://acme.zendesk.test/agent/tickets/4410"}
		if err := delivery.ResolveDelivered(ctx, e.Store, unknown, delivery.Receipt{}, e.Now); err == nil {
			t.Fatal("resolved as delivered without the helpdesk's id")
		}
		if err := delivery.ResolveDelivered(ctx, e.Store, unknown, rc, e.Now); err != nil {
			t.Fatal(err)
		}
		r := e.Record(unknown)
		if r.State != delivery.StateDelivered || r.ExternalID != rc.ExternalID || r.ExternalURL != rc.ExternalURL ||
			!r.DeliveredAt.Equal(e.Now) || !r.DueAt.IsZero() || r.SentUnknown {
			t.Fatalf("after resolve: %+v", r)
		}
		want := core.DeliveryView{State: "delivered", ExternalID: rc.ExternalID, ExternalURL: rc.ExternalURL}
		if v := e.Get(unknown); v.Delivery == nil || *v.Delivery != want {
			t.Fatalf("get_ticket delivery = %+v", v.Delivery)
		}
		if ids, _ := e.Store.Due(ctx, e.Now.Add(time.Hour), 10); len(ids) != 0 {
			t.Fatalf("Due = %v", ids)
		}
		for id, st := range map[string]delivery.State{unknown: delivery.StateDelivered, failed: delivery.StateFailed} {
			err := delivery.ResolveDelivered(ctx, e.Store, id, rc, e.Now)
			var se *delivery.StateError
			if !errors.As(err, &se) || se.State != st || se.Want != delivery.StateUnknown {
				t.Fatalf("ResolveDelivered(%s): %v, want refused naming %s", st, err, st)
			}
			if err := delivery.ResolveResend(ctx, e.Store, id, e.Now); !errors.Is(err, delivery.ErrWrongState) {
				t.Fatalf("ResolveResend(%s): %v, want refused", st, err)
			}
		}
	})

	t.Run("retry and resolve settle only the record they read: a ticket that went round another cycle meanwhile is left alone", func(t *testing.T) {
		for _, c := range []struct {
			name   string
			final  delivery.State
			change func(ctx context.Context, a delivery.Admin, id string, now time.Time) error
		}{
			{"retry", delivery.StateFailed, delivery.Retry},
			{"resolve -resend", delivery.StateUnknown, delivery.ResolveResend},
			{"resolve as delivered", delivery.StateUnknown, func(ctx context.Context, a delivery.Admin, id string, now time.Time) error {
				return delivery.ResolveDelivered(ctx, a, id, delivery.Receipt{ExternalID: "4410"}, now)
			}},
		} {
			e := NewEnv(t, h.Open(t), true)
			id := e.Create(fmt.Sprintf(`{"title":"cycled %s"}`, c.name))
			first := delivery.Update{State: c.final, Attempts: 2, SentUnknown: true, SentAt: SentAt(e.Now), Error: "first cycle"}
			e.claimAndRecord(id, first)
			// Between the person's read and write, another person puts the
			// ticket back and a worker takes it round a cycle to the same
			// state, with a later send.
			later := SentAt(e.Now.Add(10 * time.Minute))
			cycled := &cycling{Adapter: e.Store, cycle: func() {
				if err := delivery.ResolveResend(ctx, e.Store, id, e.Now); err != nil && !errors.Is(err, delivery.ErrWrongState) {
					t.Fatal(err)
				}
				if err := delivery.Retry(ctx, e.Store, id, e.Now); err != nil && !errors.Is(err, delivery.ErrWrongState) {
					t.Fatal(err)
				}
				e.claimAndRecord(id, delivery.Update{State: c.final, Attempts: 2, SentUnknown: true, SentAt: later, Error: "second cycle"})
			}}
			err := c.change(ctx, cycled, id, e.Now.Add(time.Hour))
			if !errors.Is(err, delivery.ErrChanged) {
				t.Fatalf("%s of a ticket that changed since it was read: %v, want ErrChanged", c.name, err)
			}
			if r := e.Record(id); r.State != c.final || !r.SentAt.Equal(later) || r.Error != "second cycle" {
				t.Fatalf("%s refused, yet the record is %+v; want the second cycle's, sent at %v", c.name, r, later)
			}
			// Read again, the change goes through.
			if err := c.change(ctx, e.Store, id, e.Now.Add(time.Hour)); err != nil {
				t.Fatalf("%s after a fresh read: %v", c.name, err)
			}
			if r := e.Record(id); r.State == c.final || (r.State == delivery.StatePending && !r.SentAt.Equal(later)) {
				t.Fatalf("%s after a fresh read: %+v; want it moved on, keeping the later send %v", c.name, r, later)
			}
		}
	})

	t.Run("resolve unknown as to be sent again: pending, due now, counts reset, earlier send kept for a lookup", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		id := e.Create(`{"title":"resend"}`)
		e.Finish(id, delivery.StateUnknown)
		sentAt := SentAt(e.Now)
		e.Now = e.Now.Add(time.Minute)
		if err := delivery.ResolveResend(ctx, e.Store, id, e.Now); err != nil {
			t.Fatal(err)
		}
		r := e.Record(id)
		if r.State != delivery.StatePending || r.Attempts != 0 || !r.SentUnknown || !r.SentAt.Equal(sentAt) || r.LookupFailures != 0 ||
			!r.DueAt.Equal(e.Now.Truncate(time.Second)) || r.ExternalID != "" {
			t.Fatalf("after resolve: %+v; want pending, may be in the helpdesk since %v", r, sentAt)
		}
		c, err := e.Claim(id, "w")
		if err != nil || !c.Before.SentUnknown || !c.Before.SentAt.Equal(sentAt) {
			t.Fatalf("claim after resolve: %+v, %v", c.Before, err)
		}
		if err := delivery.ResolveResend(ctx, e.Store, "no-such-ticket", e.Now); !errors.Is(err, delivery.ErrNoRecord) {
			t.Fatalf("ResolveResend(missing): %v, want ErrNoRecord", err)
		}
	})

	t.Run("the start of an unknown send round-trips to the millisecond, through release, claim, list, retry and resolve", func(t *testing.T) {
		e := NewEnv(t, h.Open(t), true)
		id := e.Create(`{"title":"sent at"}`)
		sentAt := SentAt(e.Now)
		e.MustClaim(id, "w1")
		due := e.Now.Truncate(time.Second).Add(20 * time.Second)
		u := delivery.Update{State: delivery.StatePending, Attempts: 1, SentUnknown: true, SentAt: sentAt, DueAt: due, Error: "send unknown: timeout"}
		if err := e.Store.Record(ctx, id, "w1", u); err != nil {
			t.Fatal(err)
		}
		if r := e.Record(id); !r.SentAt.Equal(sentAt) || !r.SentUnknown {
			t.Fatalf("after release: %+v, want sent at %v", r, sentAt)
		}
		e.Now = due
		c, err := e.Claim(id, "w2")
		if err != nil || !c.Before.SentAt.Equal(sentAt) {
			t.Fatalf("claim: %+v, %v; want sent at %v", c.Before, err, sentAt)
		}
		// Final failed with the flag set: what a person's retry must keep
		// (the engine itself ends such a ticket unknown).
		u.State, u.DueAt, u.Attempts = delivery.StateFailed, time.Time{}, 8
		if err := e.Store.Record(ctx, id, "w2", u); err != nil {
			t.Fatal(err)
		}
		listed, err := e.Store.List(ctx, delivery.StateFailed, 10)
		if err != nil || len(listed) != 1 || !listed[0].SentAt.Equal(sentAt) {
			t.Fatalf("List(failed) = %+v, %v", listed, err)
		}
		e.Now = e.Now.Add(3 * time.Hour)
		if err := delivery.Retry(ctx, e.Store, id, e.Now); err != nil {
			t.Fatal(err)
		}
		r := e.Record(id)
		if r.State != delivery.StatePending || r.Attempts != 0 || r.LookupFailures != 0 || !r.SentUnknown || !r.SentAt.Equal(sentAt) ||
			!r.DueAt.Equal(e.Now.Truncate(time.Second)) {
			t.Fatalf("after retry: %+v; want pending, attempts reset, may be in the helpdesk since %v", r, sentAt)
		}
		// Ruled out and sent again: a record without a send of unknown
		// outcome has no start.
		e.MustClaim(id, "w3")
		if err := e.Store.Record(ctx, id, "w3", delivery.Update{State: delivery.StatePending, Attempts: 1, DueAt: e.Now.Truncate(time.Second)}); err != nil {
			t.Fatal(err)
		}
		if r := e.Record(id); r.SentUnknown || !r.SentAt.IsZero() {
			t.Fatalf("after a known send: %+v, want no send start", r)
		}
	})
}

// cycling is an Adapter whose first read of a delivery record runs cycle
// after reading: another person's change and a worker's cycle landing
// between an operator's read and write.
type cycling struct {
	Adapter
	cycle func()
	done  bool
}

func (c *cycling) Delivery(ctx context.Context, id string) (delivery.Record, error) {
	r, err := c.Adapter.Delivery(ctx, id)
	if !c.done {
		c.done = true
		c.cycle()
	}
	return r, err
}

// Sweep is one round of a worker, for the tests that drive deliveries
// step by step: it asks eng's store for up to concurrency due tickets
// (one Due query), delivers them side by side, waits for them and returns
// how many recorded a step. A ticket another worker holds, or whose step
// fails, is not counted.
func Sweep(ctx context.Context, eng *delivery.Engine, concurrency int) int {
	ids, err := eng.Store.Due(ctx, engineNow(eng), concurrency)
	if err != nil {
		return 0
	}
	var moved atomic.Int64
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if _, err := eng.Deliver(ctx, id); err == nil {
				moved.Add(1)
			}
		})
	}
	wg.Wait()
	return int(moved.Load())
}

// SweepAll runs workers side by side over eng's store, each sweeping up
// to batch due tickets at a time (Sweep) until nothing is due at eng's
// clock, and returns once all have stopped. A worker gives up after 50
// sweeps, so a ticket that stays due cannot hold the test: the caller's
// checks of each ticket's state show it.
func SweepAll(ctx context.Context, eng *delivery.Engine, workers, batch int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range 50 {
				Sweep(ctx, eng, batch)
				if due, _ := eng.Store.Due(ctx, engineNow(eng), 1); len(due) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
}

// engineNow is eng's clock: its Now, or the real clock.
func engineNow(eng *delivery.Engine) time.Time {
	if eng.Now != nil {
		return eng.Now()
	}
	return time.Now()
}

// Race makes n calls of f side by side, f(0) to f(n-1), and counts those
// that won (f returned nil) and those refused with
// delivery.ErrNotClaimable; any other error fails the test.
func Race(t testing.TB, n int, f func(i int) error) (wins, refused int) {
	var won, lost atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			switch err := f(i); {
			case err == nil:
				won.Add(1)
			case errors.Is(err, delivery.ErrNotClaimable):
				lost.Add(1)
			default:
				t.Errorf("call %d of %d: %v", i+1, n, err)
			}
		})
	}
	wg.Wait()
	return int(won.Load()), int(lost.Load())
}
