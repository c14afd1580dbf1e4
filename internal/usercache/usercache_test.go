package usercache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/testenv"
)

// countingUsers is a core.Users that counts its calls per user.
type countingUsers struct {
	mu    sync.Mutex
	users map[string]core.User
	err   error // when set, every call fails with it
	calls map[string]int
	total atomic.Int64
}

func newCounting(ids ...string) *countingUsers {
	f := &countingUsers{users: map[string]core.User{}, calls: map[string]int{}}
	for _, id := range ids {
		f.users[id] = core.User{ExternalID: id, TenantID: "tenant-" + id, UserID: "u-" + id}
	}
	return f
}

func (f *countingUsers) User(_ context.Context, id string) (core.User, error) {
	f.total.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[id]++
	if f.err != nil {
		return core.User{}, f.err
	}
	u, ok := f.users[id]
	if !ok {
		return core.User{}, core.ErrNotFound
	}
	return u, nil
}

func (f *countingUsers) callsFor(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[id]
}

func newCache(next core.Users, ttl time.Duration, size int) (*Cache, *testenv.Clock) {
	clk := testenv.NewClock(time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC))
	c := New(next, ttl, size)
	c.now = clk.Now
	return c, clk
}

// TestLookups: each case is a sequence of steps (a lookup, or moving the
// clock) and the number of calls the wrapped Users must have seen.
func TestLookups(t *testing.T) {
	type step struct {
		advance time.Duration // moves the clock before the lookup
		id      string
		wantErr error
	}
	tests := []struct {
		name      string
		fail      error // the wrapped Users fails every call with it
		steps     []step
		wantCalls int
	}{
		{"second lookup within TTL -> served from cache (1 call)",
			nil, []step{{0, "user-a", nil}, {59 * time.Second, "user-a", nil}}, 1},
		{"lookup at exactly TTL -> expired, new call (2 calls)",
			nil, []step{{0, "user-a", nil}, {60 * time.Second, "user-a", nil}}, 2},
		{"lookup after TTL -> new call (2 calls)",
			nil, []step{{0, "user-a", nil}, {61 * time.Second, "user-a", nil}}, 2},
		{"refreshed after TTL -> cached again (2 calls for 3 lookups)",
			nil, []step{{0, "user-a", nil}, {61 * time.Second, "user-a", nil}, {time.Second, "user-a", nil}}, 2},
		{"unknown user (ErrNotFound) -> not cached (2 calls)",
			nil, []step{{0, "nobody", core.ErrNotFound}, {0, "nobody", core.ErrNotFound}}, 2},
		{"store error -> not cached (2 calls)",
			core.ErrBusy, []step{{0, "user-a", core.ErrBusy}, {0, "user-a", core.ErrBusy}}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := newCounting("user-a")
			next.err = tc.fail
			c, clk := newCache(next, 60*time.Second, 8)
			for i, s := range tc.steps {
				clk.Advance(s.advance)
				u, err := c.User(context.Background(), s.id)
				if !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d (%s): err %v, want %v", i, s.id, err, s.wantErr)
				}
				if err == nil && (u.ExternalID != s.id || u.TenantID != "tenant-"+s.id) {
					t.Fatalf("step %d: got user %+v", i, u)
				}
			}
			if got := next.total.Load(); got != int64(tc.wantCalls) {
				t.Errorf("calls to the wrapped Users: %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

// TestDisabledUserCached: a disabled user is a found record; it is cached
// like any other and still reported disabled.
func TestDisabledUserCached(t *testing.T) {
	next := newCounting()
	next.users["user-d"] = core.User{ExternalID: "user-d", TenantID: "t", UserID: "dave", Disabled: true}
	c, _ := newCache(next, time.Minute, 8)
	for range 2 {
		u, err := c.User(context.Background(), "user-d")
		if err != nil || !u.Disabled {
			t.Fatalf("got %+v, %v; want the disabled user", u, err)
		}
	}
	if n := next.total.Load(); n != 1 {
		t.Errorf("calls: %d, want 1", n)
	}
}

// TestSizeBound: with size 2, three distinct users leave two cached; the
// oldest is the one evicted.
func TestSizeBound(t *testing.T) {
	next := newCounting("u1", "u2", "u3")
	c, _ := newCache(next, time.Hour, 2)
	ctx := context.Background()
	for _, id := range []string{"u1", "u2", "u3"} {
		if _, err := c.User(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != 2 {
		t.Fatalf("Len after 3 users with size 2: %d, want 2", n)
	}
	// u2 and u3 are still cached; u1 (the oldest) was evicted.
	for _, id := range []string{"u3", "u2"} {
		if _, err := c.User(ctx, id); err != nil {
			t.Fatal(err)
		}
		if n := next.callsFor(id); n != 1 {
			t.Errorf("%s: %d calls, want 1 (still cached)", id, n)
		}
	}
	if _, err := c.User(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if n := next.callsFor("u1"); n != 2 {
		t.Errorf("u1 (oldest): %d calls, want 2 (evicted)", n)
	}
	if n := c.Len(); n != 2 {
		t.Errorf("Len: %d, want 2", n)
	}
}

// TestSizeBoundRefreshDoesNotGrow: refreshing an expired entry must not
// add a second eviction slot for it.
func TestSizeBoundRefreshDoesNotGrow(t *testing.T) {
	next := newCounting("u1", "u2", "u3")
	c, clk := newCache(next, time.Second, 2)
	ctx := context.Background()
	for range 5 {
		for _, id := range []string{"u1", "u2", "u3"} {
			if _, err := c.User(ctx, id); err != nil {
				t.Fatal(err)
			}
			if n := c.Len(); n > 2 {
				t.Fatalf("Len %d, want at most 2", n)
			}
		}
		clk.Advance(2 * time.Second)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.order) != len(c.items) {
		t.Errorf("order has %d entries for %d items", len(c.order), len(c.items))
	}
}

func TestDefaults(t *testing.T) {
	c := New(newCounting(), 0, -1)
	if c.ttl != DefaultTTL || c.size != DefaultSize {
		t.Errorf("ttl %v size %d, want %v %d", c.ttl, c.size, DefaultTTL, DefaultSize)
	}
}

// TestConcurrent: many goroutines on few users, a small bound and a moving
// clock; run with -race.
func TestConcurrent(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	next := newCounting(ids...)
	c, clk := newCache(next, 10*time.Millisecond, 3)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := ids[(g+i)%len(ids)]
				u, err := c.User(context.Background(), id)
				if err != nil || u.ExternalID != id {
					t.Errorf("%s: got %+v, %v", id, u, err)
					return
				}
				if i%50 == 0 {
					clk.Advance(time.Millisecond)
				}
				if n := c.Len(); n > 3 {
					t.Errorf("Len %d, want at most 3", n)
					return
				}
			}
		}()
	}
	wg.Wait()
	// After the churn the eviction order and the entries still agree, and
	// the cache still answers a repeat from memory.
	c.mu.Lock()
	order, items := len(c.order), len(c.items)
	c.mu.Unlock()
	if order != items {
		t.Fatalf("eviction order holds %d ids for %d entries", order, items)
	}
	for _, id := range ids {
		if _, err := c.User(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		before := next.total.Load()
		if _, err := c.User(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if n := next.total.Load(); n != before {
			t.Fatalf("%s looked up again right after it was cached: %d calls, want %d", id, n, before)
		}
	}
}
