package memstore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

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
			Refuse:  func() memstore.Writes { return func() error { return errors.New("out of stock") } },
			Effects: func(*testing.T) int { mu.Lock(); defer mu.Unlock(); return len(effects) },
		}
	})
}
