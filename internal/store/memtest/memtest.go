// Package memtest is an in-memory core.Store and delivery.Outbox for unit
// tests and benchmarks of the handler without I/O. It forgets everything
// on restart, so it is never a production store; the product's in-memory
// user directory is package memstore.
package memtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// Compile-time check: the domain's store.
var _ core.Store = (*Store)(nil)

// Store keeps records and tickets in maps under one mutex, which makes
// each claim a transaction.
type Store struct {
	mu      sync.Mutex
	ops     map[string]idem.Record
	tickets map[string]core.Ticket
	calls   int // claims and Ticket calls, reads included
	// deliveries are the tickets' delivery records (see delivery.go).
	deliveries map[string]*delivery.Record
	// DeliveryCalls counts calls of the delivery.Outbox methods.
	DeliveryCalls atomic.Int64
}

// New returns an empty store.
func New() *Store {
	return &Store{ops: map[string]idem.Record{}, tickets: map[string]core.Ticket{},
		deliveries: map[string]*delivery.Record{}}
}

// Claims implements core.Store.
func (s *Store) Claims() idem.Store[core.Writes] { return claims{s} }

// claims is the Store's idem.Store: the one place its claims are made and
// answered, as package idem's memory store answers them.
type claims struct{ s *Store }

// Claim implements idem.Store: a record that cannot hold its key is
// invalid, an ended context busy, a live record is returned, a ticket id
// that exists refuses the claim; all with nothing written.
func (c claims) Claim(ctx context.Context, rec idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if err := rec.Check(now); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", idem.ErrBusy, err)
	}
	if old, ok := s.ops[rec.Key]; ok && old.Live(now) {
		old.Result = slices.Clone(old.Result)
		return &old, nil
	}
	for i, t := range w.Tickets {
		if _, ok := s.tickets[t.ID]; ok {
			return nil, &idem.RefusedError{Index: i, Err: errDuplicateTicket}
		}
	}
	rec.Result = slices.Clone(rec.Result)
	s.ops[rec.Key] = rec
	for _, t := range w.Tickets {
		s.tickets[t.ID] = t
		s.addDelivery(t, tracing.Traceparent(ctx))
	}
	return nil, nil
}

// Put stores a record as is: for tests that need a pending or expired
// record.
func (s *Store) Put(rec idem.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops[rec.Key] = rec
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

// Calls returns how many times a claim or Ticket was called, whatever
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
