package delivery

import (
	"context"
	"slices"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
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

func (s notifyingStore) Claims() idem.Store[core.Writes] {
	return core.ClaimFunc(func(ctx context.Context, rec idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
		held, err := s.Store.Claims().Claim(ctx, rec, w, now)
		if err == nil && held == nil && (slices.ContainsFunc(w.Tickets, func(t core.Ticket) bool { return t.Delivery != nil }) ||
			slices.ContainsFunc(w.Items, func(it core.ItemWrite) bool { return it.Effect != nil })) {
			s.notify()
		}
		return held, err
	})
}
