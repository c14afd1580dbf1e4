package delivery

import (
	"context"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// NotifyOnCommit wraps the callback's store so that notify (a Worker's
// Notify) runs after each transaction that created a ticket to deliver:
// the local worker then picks it up at once instead of at its next poll.
func NotifyOnCommit(s core.Store, notify func()) core.Store {
	return notifyingStore{Store: s, notify: notify}
}

type notifyingStore struct {
	core.Store
	notify func()
}

func (s notifyingStore) Create(ctx context.Context, op core.Operation, t core.Ticket, now time.Time) (*core.Operation, error) {
	existing, err := s.Store.Create(ctx, op, t, now)
	if err == nil && existing == nil && t.Delivery != nil {
		s.notify()
	}
	return existing, err
}
