package memstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/idemtest"
	"github.com/aivax-examples/idempotent-callback/idem/memstore"
)

func TestConformance(t *testing.T) {
	idemtest.Run(t, func(t *testing.T, _ func() time.Time) idemtest.Fixture[memstore.Writes] {
		var mu sync.Mutex
		effects := map[string]bool{}
		return idemtest.Fixture[memstore.Writes]{
			Store: memstore.New(),
			Write: func(id string) memstore.Writes {
				return func() error {
					mu.Lock()
					defer mu.Unlock()
					if effects[id] {
						return errors.New("effect exists")
					}
					effects[id] = true
					return nil
				}
			},
			Refuse: func() memstore.Writes { return func() error { return errors.New("out of stock") } },
			// The writer stops when the context ends, writing nothing.
			Cancel: func(_ string, cancel context.CancelFunc) memstore.Writes {
				return func() error {
					cancel()
					return errors.New("write not made: the context ended")
				}
			},
			Effects: func(*testing.T) int { mu.Lock(); defer mu.Unlock(); return len(effects) },
		}
	})
}

// The zero value is an empty store, ready to use.
func TestZeroValue(t *testing.T) {
	var s memstore.Store
	g := &idem.Guard[memstore.Writes]{Store: &s, Retention: time.Hour}
	for _, want := range []idem.Status{idem.Created, idem.Replayed} {
		o := g.Do(context.Background(), idem.Call{Tenant: "t", Owner: "alice", RequestID: "r1", Function: "f", Arguments: []byte(`{}`)}, func(idem.Claim) ([]byte, memstore.Writes, error) {
			return []byte(`{"ok":true}`), nil, nil
		})
		if o.Status != want {
			t.Fatalf("status = %v (%v), want %v", o.Status, o.Err, want)
		}
	}
	if s.Len() != 1 {
		t.Fatalf("Len = %d, want 1", s.Len())
	}
}
