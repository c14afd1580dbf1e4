package core

import (
	"context"
	"time"
)

// TimedStore times each call to Store and hands the time to Observe (a
// metrics recorder's StoreCall), with the call's context.
type TimedStore struct {
	Store   Store
	Observe func(ctx context.Context, d time.Duration)
}

// TimedUsers times each read of Users and hands the time to Observe, as a
// store call.
type TimedUsers struct {
	Users   Users
	Observe func(ctx context.Context, d time.Duration)
}

// Create times the transaction.
func (s TimedStore) Create(ctx context.Context, op Operation, t Ticket, now time.Time) (*Operation, error) {
	start := time.Now()
	existing, err := s.Store.Create(ctx, op, t, now)
	s.Observe(ctx, time.Since(start))
	return existing, err
}

// Ticket times the read.
func (s TimedStore) Ticket(ctx context.Context, id string) (Ticket, error) {
	start := time.Now()
	t, err := s.Store.Ticket(ctx, id)
	s.Observe(ctx, time.Since(start))
	return t, err
}

// User times the read.
func (s TimedUsers) User(ctx context.Context, externalID string) (User, error) {
	start := time.Now()
	u, err := s.Users.User(ctx, externalID)
	s.Observe(ctx, time.Since(start))
	return u, err
}
