// Package memstore is an in-memory idem.Store, for tests and examples. It
// forgets everything when the process ends, so it is never a production
// store.
package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// Writes are the caller's writes in memory: a function run under the
// store's lock once the key is known to be free. It must change nothing
// when it returns an error: the error refuses the claim (idem.Refused),
// and nothing is claimed.
type Writes func() error

// Compile-time check.
var _ idem.Store[Writes] = (*Store)(nil)

// Store keeps records in a map under one mutex, which makes each Claim a
// transaction. The zero value is an empty store, ready to use.
type Store struct {
	mu   sync.Mutex
	recs map[string]idem.Record
}

// New returns an empty store, as &Store{} is.
func New() *Store { return &Store{} }

// Claim implements idem.Store, rec.AltKey included (a live record under
// it with rec's tenant and fingerprint holds the call). A context that
// has ended, before the claim or while writes run (writes then return an
// error), answers busy, with nothing written.
func (s *Store) Claim(ctx context.Context, rec idem.Record, writes Writes, now time.Time) (*idem.Record, error) {
	if err := rec.Check(now); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", idem.ErrBusy, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	own, held := s.recs[rec.Key]
	held = held && own.Live(now)
	if alt, ok := s.recs[rec.AltKey]; ok && rec.AltKey != rec.Key && alt.Live(now) &&
		alt.Tenant == rec.Tenant && alt.Fingerprint == rec.Fingerprint &&
		(!held || own.Tenant != rec.Tenant || own.Fingerprint != rec.Fingerprint) {
		alt.Result = clone(alt.Result)
		return &alt, nil
	}
	if held {
		own.Result = clone(own.Result)
		return &own, nil
	}
	if writes != nil {
		if err := writes(); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: the context ended during the writes: %w", idem.ErrBusy, err)
			}
			return nil, &idem.RefusedError{Index: -1, Err: err}
		}
	}
	rec.Result = clone(rec.Result)
	rec.AltKey = "" // an input, not stored
	if s.recs == nil {
		s.recs = map[string]idem.Record{}
	}
	s.recs[rec.Key] = rec
	return nil, nil
}

// Len returns how many records are stored, expired ones included.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
