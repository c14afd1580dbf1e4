package memtest

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// The store implements delivery.Outbox: each method is atomic under the
// store's mutex, which makes the conditional updates conditional.
var (
	_ delivery.Outbox         = (*Store)(nil)
	_ delivery.WaitingCounter = (*Store)(nil)
)

// addDelivery records t's delivery when the service asked for one. The
// caller holds s.mu.
// traceparent is the creating call's (core.Writes.Traceparent), kept for
// the delivery's link.
func (s *Store) addDelivery(t core.Ticket, traceparent string) {
	if t.Delivery == nil {
		return
	}
	s.deliveries[t.ID] = &delivery.Record{TicketID: t.ID, Traceparent: traceparent,
		Update: delivery.Update{State: delivery.State(t.Delivery.State), DueAt: t.Delivery.DueAt}}
}

// addEffect records the delivery of the effect of the item key. The
// caller holds s.mu.
func (s *Store) addEffect(key string, e core.Effect, traceparent string) {
	s.effects[key] = e
	s.deliveries[key] = &delivery.Record{TicketID: key, Kind: e.Kind, Traceparent: traceparent,
		Update: delivery.Update{State: delivery.StatePending, DueAt: e.DueAt}}
}

// coreDelivery is the record as core shows it. The caller holds s.mu.
func (s *Store) coreDelivery(id string) *core.DeliveryStatus {
	r, ok := s.deliveries[id]
	if !ok {
		return nil
	}
	return r.Core()
}

// Due implements delivery.Outbox.
func (s *Store) Due(_ context.Context, now time.Time, limit int) ([]string, error) {
	s.DeliveryCalls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []*delivery.Record
	for _, r := range s.deliveries {
		if r.State.Live() && !r.DueAt.After(now) {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b *delivery.Record) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return strings.Compare(a.TicketID, b.TicketID)
	})
	ids := make([]string, 0, min(limit, len(due)))
	for _, r := range due[:min(limit, len(due))] {
		ids = append(ids, r.TicketID)
	}
	return ids, nil
}

// Waiting implements delivery.WaitingCounter.
func (s *Store) Waiting(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.deliveries {
		if r.State.Live() {
			n++
		}
	}
	return n, nil
}

// Claim implements delivery.Outbox.
func (s *Store) Claim(_ context.Context, id, owner string, now, leaseUntil time.Time) (delivery.Claimed, error) {
	s.DeliveryCalls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.deliveries[id]
	if !ok || !claimable(r, now) {
		return delivery.Claimed{}, delivery.ErrNotClaimable
	}
	before := *r
	r.State, r.LeaseOwner, r.LeaseUntil, r.DueAt = delivery.StateDelivering, owner, leaseUntil, leaseUntil.Add(time.Second)
	if e, ok := s.effects[id]; ok {
		return delivery.Claimed{Ticket: delivery.HelpdeskTicket{ID: id}, Before: before,
			Effect: &delivery.Effect{Kind: e.Kind, ID: e.ID, TicketID: e.TicketID, Payload: e.Payload}}, nil
	}
	ticket, err := delivery.NewTicket(s.tickets[id])
	if err != nil {
		// Claimed all the same: the engine records it failed.
		return delivery.Claimed{Ticket: delivery.HelpdeskTicket{ID: id}, Before: before}, delivery.Unreadable(id, err)
	}
	return delivery.Claimed{Ticket: ticket, Before: before}, nil
}

// claimable: pending and due, or delivering with an expired lease. Times
// compare in whole seconds, as the durable stores keep them.
func claimable(r *delivery.Record, now time.Time) bool {
	sec := now.Unix()
	switch r.State {
	case delivery.StatePending:
		return r.DueAt.Unix() <= sec
	case delivery.StateDelivering:
		return r.LeaseUntil.Unix() < sec
	}
	return false
}

// Record implements delivery.Outbox.
func (s *Store) Record(_ context.Context, id, owner string, u delivery.Update) error {
	s.DeliveryCalls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.deliveries[id]
	if !ok || r.State != delivery.StateDelivering || r.LeaseOwner != owner {
		return delivery.ErrLeaseLost
	}
	*r = recorded(id, r.Kind, u, r.Traceparent)
	return nil
}

// Delivery implements delivery.Outbox.
func (s *Store) Delivery(_ context.Context, id string) (delivery.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.deliveries[id]
	if !ok {
		return delivery.Record{}, delivery.ErrNoRecord
	}
	out := *r
	if !delivery.IsEffect(id) {
		out.FollowUps = s.tickets[id].Attrs.List(core.AttrFollowUps)
	}
	return out, nil
}

var _ delivery.Admin = (*Store)(nil)

// List implements delivery.Admin.
func (s *Store) List(_ context.Context, state delivery.State, limit int) ([]delivery.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []delivery.Record
	for _, r := range s.deliveries {
		if r.State == state {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b delivery.Record) int { return strings.Compare(a.TicketID, b.TicketID) })
	return out[:min(max(limit, 0), len(out))], nil
}

// Settle implements delivery.Admin.
func (s *Store) Settle(_ context.Context, id string, read delivery.Record, u delivery.Update) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.deliveries[id]
	if !ok {
		return delivery.ErrNoRecord
	}
	if !delivery.SameAsRead(*r, read) {
		return delivery.Refusal(id, *r, read)
	}
	*r = recorded(id, r.Kind, u, r.Traceparent)
	return nil
}

// recorded is the record u leaves on ticket id: no lease, and a due time
// only while pending.
func recorded(id, kind string, u delivery.Update, traceparent string) delivery.Record {
	r := delivery.Record{TicketID: id, Kind: kind, Update: u, Traceparent: traceparent}
	if u.State != delivery.StatePending {
		r.DueAt = time.Time{}
	}
	return r
}

var _ delivery.Sequencer = (*Store)(nil)

// Neighbours implements delivery.Sequencer.
func (s *Store) Neighbours(_ context.Context, id string) (ticket, before, after string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ticket = id
	if delivery.IsEffect(id) {
		e, ok := s.effects[id]
		if !ok {
			return "", "", "", delivery.ErrNoRecord
		}
		ticket = e.TicketID
	}
	if ticket == "" {
		return "", "", "", nil
	}
	before, after = delivery.Neighbours(ticket, s.tickets[ticket].Attrs.List(core.AttrFollowUps), id)
	return ticket, before, after, nil
}

// Wake implements delivery.Sequencer.
func (s *Store) Wake(_ context.Context, id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.deliveries[id]; ok && delivery.Wakeable(*r) && r.DueAt.After(now) {
		r.DueAt = time.Unix(now.Unix(), 0)
	}
	return nil
}
