package core_test

import (
	"testing"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/coretest"
)

// cachedFixture is newFixture's service with a result cache of n entries.
func cachedFixture(policy idem.Policy, n int) *fixture {
	f := newFixture(policy)
	f.svc.Cache = idem.NewCache(n)
	return f
}

// TestCachedRepeat: on a warm service (its Cache holds the call's record)
// a repeat is answered deduplicated with the bytes of the first answer's
// replay and makes no store call, under either policy; every check before
// the claim still runs on that path, so another user of the tenant is
// still request_id_conflict (judged on the cached record, also without a
// store call), a disabled user still 403, and bad arguments still
// invalid_arguments.
func TestCachedRepeat(t *testing.T) {
	for _, policy := range []idem.Policy{idem.PolicyArguments, idem.PolicyRequest} {
		f := cachedFixture(policy, 16)
		first := f.handle(t, create("user-a", "r-1", okArgs))
		if first.Kind != core.KindCreated {
			t.Fatalf("%s: first: %+v", policy, first)
		}
		cold := newFixture(policy) // the same repeat answered by the store
		cold.handle(t, create("user-a", "r-1", okArgs))
		want := cold.handle(t, create("user-a", "r-1", okArgs))

		calls, stored := f.store.Calls(), f.count()
		repeat := f.handle(t, create("user-a", "r-1", `{"priority":"high","title":"Cannot sign in","description":"Since Monday."}`))
		if repeat.Kind != core.KindDuplicate || repeat.Key != first.Key || coretest.TicketID(repeat) != coretest.TicketID(first) {
			t.Fatalf("%s: cached repeat: %+v; want duplicate of %s", policy, repeat, coretest.TicketID(first))
		}
		if want.Kind != core.KindDuplicate || string(repeat.Body) != string(want.Body) {
			t.Fatalf("%s: cached repeat answered %s; the store's replay answers %s", policy, repeat.Body, want.Body)
		}
		if got := f.store.Calls(); got != calls {
			t.Fatalf("%s: the cached repeat made %d store calls; want 0", policy, got-calls)
		}

		other := f.handle(t, create("user-b", "r-1", okArgs))
		if other.Kind != core.KindConflict || other.Code != core.CodeRequestIDConflict || other.Body != nil {
			t.Fatalf("%s: another user's repeat: %+v; want request_id_conflict", policy, other)
		}
		if got := f.store.Calls(); got != calls {
			t.Fatalf("%s: another user's repeat made %d store calls; the cache holds the record", policy, got-calls)
		}
		if out := f.handle(t, create("user-d", "r-1", okArgs)); out.Kind != core.KindForbidden || out.Body != nil {
			t.Fatalf("%s: disabled user's repeat: %+v; want forbidden", policy, out)
		}
		if out := f.handle(t, create("user-a", "r-1", `{"title":""}`)); out.Kind != core.KindRejected || out.Code != core.CodeInvalidArguments {
			t.Fatalf("%s: repeat with invalid arguments: %+v; want invalid_arguments", policy, out)
		}
		if f.count() != stored {
			t.Fatalf("%s: the repeats wrote: %v -> %v", policy, stored, f.count())
		}
	}
}

// TestCachedRepeatOtherArguments: under PolicyRequest a repeat with other
// arguments is still arguments_mismatch on a warm service, and writes
// nothing; under PolicyArguments it is a new operation, created.
func TestCachedRepeatOtherArguments(t *testing.T) {
	changed := `{"title":"Cannot sign in","priority":"low"}`
	f := cachedFixture(idem.PolicyRequest, 16)
	if out := f.handle(t, create("user-a", "r-1", okArgs)); out.Kind != core.KindCreated {
		t.Fatalf("first: %+v", out)
	}
	stored := f.count()
	out := f.handle(t, create("user-a", "r-1", changed))
	if out.Kind != core.KindRejected || out.Code != core.CodeArgumentsMismatch || coretest.TicketID(out) != "" {
		t.Fatalf("PolicyRequest, other arguments on a warm service: %+v; want arguments_mismatch", out)
	}
	if f.count() != stored {
		t.Fatalf("arguments_mismatch wrote: %v -> %v", stored, f.count())
	}

	g := cachedFixture(idem.PolicyArguments, 16)
	first := g.handle(t, create("user-a", "r-1", okArgs))
	if out := g.handle(t, create("user-a", "r-1", changed)); out.Kind != core.KindCreated || coretest.TicketID(out) == coretest.TicketID(first) {
		t.Fatalf("PolicyArguments, other arguments on a warm service: %+v; want a new ticket", out)
	}
}

// TestCachedRepeatUserDisabled: a user disabled after creating gets 403
// for the repeat the cache holds: the user is read before the Guard.
func TestCachedRepeatUserDisabled(t *testing.T) {
	f := cachedFixture(idem.PolicyArguments, 16)
	enabled := memstore.Users{"user-e": {TenantID: "tenant-a", UserID: "erin"}}
	f.svc.Users = enabled
	if out := f.handle(t, create("user-e", "r-1", okArgs)); out.Kind != core.KindCreated {
		t.Fatalf("create: %+v", out)
	}
	enabled["user-e"] = core.User{TenantID: "tenant-a", UserID: "erin", Disabled: true}
	if out := f.handle(t, create("user-e", "r-1", okArgs)); out.Kind != core.KindForbidden || out.Body != nil {
		t.Fatalf("disabled user's cached repeat: %+v; want forbidden", out)
	}
}

// TestServiceCheckCache: a cache of no entry fails the service's Check at
// start.
func TestServiceCheckCache(t *testing.T) {
	f := cachedFixture(idem.PolicyArguments, 0)
	if err := f.svc.Check(); err == nil {
		t.Fatal("Check passed a service whose Cache holds no entry")
	}
	if err := cachedFixture(idem.PolicyArguments, 1).svc.Check(); err != nil {
		t.Fatalf("Check of a service with a one-entry cache: %v", err)
	}
}
