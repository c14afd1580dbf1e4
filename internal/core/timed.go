package core

import (
	"context"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
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

// Claims times each claim's transaction.
func (s TimedStore) Claims() idem.Store[Writes] {
	return ClaimFunc(func(ctx context.Context, rec idem.Record, w Writes, now time.Time) (*idem.Record, error) {
		start := time.Now()
		held, err := s.Store.Claims().Claim(ctx, rec, w, now)
		s.Observe(ctx, time.Since(start))
		return held, err
	})
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
