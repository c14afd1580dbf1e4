// Package memtest is an in-memory core.Store and delivery.Outbox for unit
// tests and benchmarks of the handler without I/O. It forgets everything
// on restart, so it is never a production store; the product's in-memory
// user directory is package memstore.
package memtest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// Compile-time check: the domain's store.
var _ core.Store = (*Store)(nil)

// Store keeps operations and tickets in maps under one mutex, which makes
// each Create a transaction.
type Store struct {
	mu      sync.Mutex
	ops     map[string]core.Operation
	tickets map[string]core.Ticket
	calls   int // Create and Ticket calls, reads included
	// deliveries are the tickets' delivery records (see delivery.go).
	deliveries map[string]*delivery.Record
	// DeliveryCalls counts calls of the delivery.Outbox methods.
	DeliveryCalls atomic.Int64
}

// New returns an empty store.
func New() *Store {
	return &Store{ops: map[string]core.Operation{}, tickets: map[string]core.Ticket{},
		deliveries: map[string]*delivery.Record{}}
}

// Create implements core.Store, op.AltKey included.
func (s *Store) Create(ctx context.Context, op core.Operation, t core.Ticket, now time.Time) (*core.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	own, held := s.ops[op.Key]
	held = held && own.Live(now)
	if alt, ok := s.ops[op.AltKey]; ok && op.AltKey != op.Key && alt.Live(now) &&
		alt.TenantID == op.TenantID && alt.Fingerprint == op.Fingerprint &&
		(!held || own.TenantID != op.TenantID || own.Fingerprint != op.Fingerprint) {
		return &alt, nil // the call's operation, claimed under the other key policy
	}
	if held {
		return &own, nil
	}
	op.AltKey = "" // an input, not stored
	if _, ok := s.tickets[t.ID]; ok {
		return nil, errDuplicateTicket
	}
	s.ops[op.Key] = op
	s.tickets[t.ID] = t
	s.addDelivery(t, tracing.Traceparent(ctx))
	return nil, nil
}

// Put stores an operation as is: for tests that need a pending or expired
// record.
func (s *Store) Put(op core.Operation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops[op.Key] = op
}

// Ticket implements core.Store.
func (s *Store) Ticket(_ context.Context, id string) (core.Ticket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	t, ok := s.tickets[id]
	if !ok {
		return core.Ticket{}, core.ErrNotFound
	}
	t.Delivery = s.coreDelivery(id)
	return t, nil
}

// Calls returns how many times Create or Ticket was called, whatever
// they found: a test can see that a call never touched the store.
func (s *Store) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Count returns how many operations and tickets are stored.
func (s *Store) Count() (ops, tickets int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ops), len(s.tickets)
}

type constError string

func (e constError) Error() string { return string(e) }

const errDuplicateTicket = constError("ticket id already exists")
