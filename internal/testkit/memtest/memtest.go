// Package memtest is an in-memory core.Store and delivery.Outbox for unit
// tests and benchmarks of the handler without I/O. It forgets everything
// on restart, so it is never a production store; the product's in-memory
// user directory is package memstore.
package memtest

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	idemmem "github.com/aivax-examples/idempotent-callback/idem/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// Compile-time check: the domain's store.
var _ core.Store = (*Store)(nil)

// Store keeps records in package idem's memory store and tickets in a
// map under one mutex, taken inside the claim's: each claim is a
// transaction.
type Store struct {
	recs    idemmem.Store
	mu      sync.Mutex
	tickets map[string]core.Ticket
	// items are the items of core.Writes.Items other than tickets, by key.
	items map[string]core.Item
	// effects are the effects of items whose delivery is recorded, by
	// outbox id (the item's key).
	effects map[string]core.Effect
	calls   int // claims and Ticket calls, reads included
	// deliveries are the tickets' delivery records (see delivery.go).
	deliveries map[string]*delivery.Record
	// DeliveryCalls counts calls of the delivery.Outbox methods.
	DeliveryCalls atomic.Int64
}

// New returns an empty store.
func New() *Store {
	return &Store{tickets: map[string]core.Ticket{}, items: map[string]core.Item{}, effects: map[string]core.Effect{},
		deliveries: map[string]*delivery.Record{}}
}

// Claims implements core.Store.
func (s *Store) Claims() idem.Store[core.Writes] { return claims{s} }

// claims is the Store's idem.Store: the one place its claims are made and
// answered, by package idem's memory store (rec.AltKey included); the
// tickets are its writes, and a ticket id that exists refuses the claim.
type claims struct{ s *Store }

// Claim implements idem.Store.
func (c claims) Claim(ctx context.Context, rec idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	s := c.s
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	return s.recs.Claim(ctx, rec, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, t := range w.Tickets {
			if _, ok := s.tickets[t.ID]; ok {
				return errDuplicateTicket
			}
		}
		// The items are checked and staged before anything is written, so
		// a refusal changes nothing.
		type staged struct {
			key    string
			it     core.Item
			effect *core.Effect
		}
		var writes []staged
		hasTicket := func(id string) bool { _, ok := s.tickets[id]; return ok }
		err := core.ApplyItemWrites(w.Items, len(w.Tickets), s.item, func(key string, it core.Item, e *core.Effect, _ bool) error {
			writes = append(writes, staged{key, it, e})
			return nil
		})
		if err != nil {
			return err
		}
		// An item write names only a ticket that exists before the claim
		// (DynamoDB refuses two actions on one item in a transaction).
		for _, st := range writes {
			if id, ok := strings.CutPrefix(st.key, core.TicketKeyPrefix); ok && !hasTicket(id) {
				return fmt.Errorf("memtest: item write of %s: tickets are made by Writes.Tickets, and written to by later claims", st.key)
			}
		}
		for _, t := range w.Tickets {
			s.tickets[t.ID] = t
			s.addDelivery(t, w.Traceparent)
		}
		for _, st := range writes {
			if id, ok := strings.CutPrefix(st.key, core.TicketKeyPrefix); ok {
				t := s.tickets[id]
				t.Attrs = ticketAttrs(st.it)
				s.tickets[id] = t
				continue
			}
			s.items[st.key] = st.it
			if st.effect != nil {
				s.addEffect(st.key, *st.effect, w.Traceparent)
			}
		}
		return nil
	}, now)
}

// item reads the item of key for core.ApplyItemWrites: a ticket's typed
// fields as attributes beside its Attrs. The caller holds s.mu.
func (s *Store) item(key string) (core.Item, error) {
	if id, ok := strings.CutPrefix(key, core.TicketKeyPrefix); ok {
		t, found := s.tickets[id]
		if !found {
			return nil, nil
		}
		it := maps.Clone(t.Attrs)
		if it == nil {
			it = core.Item{}
		}
		it[core.AttrTenantID], it[core.AttrUserID] = t.TenantID, t.UserID
		return it, nil
	}
	it, found := s.items[key]
	if !found {
		return nil, nil
	}
	return maps.Clone(it), nil
}

// ticketAttrs is it less the ticket's typed fields.
func ticketAttrs(it core.Item) core.Item {
	it = maps.Clone(it)
	delete(it, core.AttrTenantID)
	delete(it, core.AttrUserID)
	return it
}

// Items implements core.Store.
func (s *Store) Items(_ context.Context, keys []string) ([]core.StoredItem, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	var out []core.StoredItem
	for _, k := range keys {
		it, _ := s.item(k)
		if it == nil {
			continue
		}
		si := core.StoredItem{Key: k, Attrs: it}
		if id, ok := strings.CutPrefix(k, core.TicketKeyPrefix); ok {
			si.Delivery = s.coreDelivery(id)
		} else {
			si.Delivery = s.coreDelivery(k)
		}
		out = append(out, si)
	}
	return out, nil
}

// Put stores a record as a claim at its CreatedAt: for tests that need a
// pending or expired record. It panics on a record that cannot hold its
// key then (idem.Record.Check) or a key a live record holds.
func (s *Store) Put(rec idem.Record) {
	if held, err := s.recs.Claim(context.Background(), rec, nil, rec.CreatedAt); err != nil || held != nil {
		panic(fmt.Sprintf("memtest: Put %s: %v (held %v)", rec.Key, err, held))
	}
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

// Count returns how many operations and items (tickets and the items of
// core.Writes.Items) are stored.
func (s *Store) Count() (ops, items int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recs.Len(), len(s.tickets) + len(s.items)
}

type constError string

func (e constError) Error() string { return string(e) }

const errDuplicateTicket = constError("ticket id already exists")
