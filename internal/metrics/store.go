package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// TimedStore times each call to a core.Store and reports it to Recorder.
type TimedStore struct {
	Store    core.Store
	Recorder Recorder
}

// TimedUsers times each read of a core.Users and reports it to Recorder,
// as a store call.
type TimedUsers struct {
	Users    core.Users
	Recorder Recorder
}

// Create times the transaction.
func (s TimedStore) Create(ctx context.Context, op core.Operation, t core.Ticket, now time.Time) (*core.Operation, error) {
	start := time.Now()
	existing, err := s.Store.Create(ctx, op, t, now)
	s.Recorder.StoreCall(ctx, time.Since(start))
	return existing, err
}

// Ticket times the read.
func (s TimedStore) Ticket(ctx context.Context, id string) (core.Ticket, error) {
	start := time.Now()
	t, err := s.Store.Ticket(ctx, id)
	s.Recorder.StoreCall(ctx, time.Since(start))
	return t, err
}

// User times the read.
func (s TimedUsers) User(ctx context.Context, externalID string) (core.User, error) {
	start := time.Now()
	u, err := s.Users.User(ctx, externalID)
	s.Recorder.StoreCall(ctx, time.Since(start))
	return u, err
}

// Collect wraps next so that each request's context collects the store
// calls made for it (WithRequest), for the line that reports the request.
func Collect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, _ := WithRequest(r.Context())
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
