package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

// Faults are the faults every store meets, each with the one answer the
// service gives for it on every store: the table RunFaults runs on each.
var Faults = []struct {
	Name string
	// Apply sets the fault up on e (its service, store or clock) and
	// returns the context of the call it hits.
	Apply func(e *Env) context.Context
	Want  core.Kind
	// Written is how many tickets the faulted call leaves.
	Written int
	// Repeat is what the same call answers once the fault is gone.
	Repeat core.Kind
}{
	{Name: "busy after the commit: the outcome is unknown to the caller", Want: core.KindBusy, Written: 1, Repeat: core.KindDuplicate,
		Apply: func(e *Env) context.Context {
			e.restart(commitThenFail{e.Store}, idem.PolicyArguments)
			return context.Background()
		}},
	{Name: "refused write: the ticket id exists (the id generator repeated)", Want: core.KindInternal, Written: 0, Repeat: core.KindCreated,
		Apply: func(e *Env) context.Context {
			taken := coretest.TicketID(e.Create("user-b", "r-taken", title))
			e.Svc.NewID = func() string { return taken }
			return context.Background()
		}},
	{Name: "ended context: the call's time ran out before its transaction", Want: core.KindBusy, Written: 0, Repeat: core.KindCreated,
		Apply: func(*Env) context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
			cancel()
			return ctx
		}},
	{Name: "invalid record: one that cannot hold its key reaches the store", Want: core.KindInternal, Written: 0, Repeat: core.KindCreated,
		Apply: func(e *Env) context.Context {
			e.restart(expiredRecord{e.Store}, idem.PolicyArguments)
			return context.Background()
		}},
}

// RunFaults runs Faults on the store h opens: each fault gives its answer,
// leaves its tickets (no more), and the same call then resolves.
func RunFaults(t *testing.T, h Harness) {
	for _, f := range Faults {
		t.Run(f.Name, func(t *testing.T) {
			e := &Env{T: t, Now: time.Now().UTC().Truncate(time.Second)}
			s, _ := h.Open(t, e.Clock)
			e.serve(s, idem.PolicyArguments)
			newID := e.Svc.NewID
			ctx := f.Apply(e)
			before := e.Tickets()
			o := e.Svc.Answer(ctx, core.Call{Function: core.CreateTicket, Content: []byte(title),
				ExternalUserID: "user-a", RequestID: "r-fault"})
			Want(t, o, f.Want)
			if o.Err == nil {
				t.Fatalf("%v without its cause for the log", o.Kind)
			}
			if n := e.Tickets() - before; n != f.Written {
				t.Fatalf("the faulted call left %d tickets, want %d", n, f.Written)
			}
			e.restart(e.Store, idem.PolicyArguments)
			e.Svc.NewID = newID
			Want(t, e.Create("user-a", "r-fault", title), f.Repeat)
			if n := e.Tickets() - before; n != 1 {
				t.Fatalf("after the repeat: %d tickets of the call, want 1", n)
			}
		})
	}
}

// expiredRecord hands the real store the call's record expiring at its
// own claim time: a record that cannot hold its key, which the store must
// refuse (idem.ErrInvalid) with nothing written.
type expiredRecord struct{ core.Store }

func (s expiredRecord) Claims() idem.Store[core.Writes] {
	return core.ClaimFunc(func(ctx context.Context, rec idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
		rec.ExpiresAt = now.Add(-time.Second)
		return s.Store.Claims().Claim(ctx, rec, w, now)
	})
}
