// Package usercache keeps recently resolved users in memory, so a warm
// Lambda pays no extra DynamoDB round trip per callback for identity.
//
// The cache is bounded (entries beyond Size evict the oldest) and each
// entry lives TTL (default 60 s): a disabled or removed user is refused at
// most TTL after the change. Unknown users are not cached, so adding a user
// takes effect at once.
package usercache

import (
	"context"
	"sync"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// Defaults.
const (
	DefaultTTL  = 60 * time.Second
	DefaultSize = 1024
)

type entry struct {
	user    core.User
	expires time.Time
}

// Cache wraps a core.Users.
type Cache struct {
	next core.Users
	ttl  time.Duration
	size int
	now  func() time.Time

	mu    sync.Mutex
	items map[string]entry
	order []string // insertion order, for eviction
}

// New wraps next. ttl <= 0 or size <= 0 take the defaults.
func New(next core.Users, ttl time.Duration, size int) *Cache {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if size <= 0 {
		size = DefaultSize
	}
	return &Cache{next: next, ttl: ttl, size: size, now: time.Now, items: make(map[string]entry, size)}
}

// User implements core.Users.
func (c *Cache) User(ctx context.Context, externalID string) (core.User, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.items[externalID]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.user, nil
	}
	u, err := c.next.User(ctx, externalID)
	if err != nil {
		return u, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, present := c.items[externalID]; !present {
		for len(c.order) >= c.size {
			delete(c.items, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, externalID)
	}
	c.items[externalID] = entry{user: u, expires: now.Add(c.ttl)}
	return u, nil
}

// Len reports how many users are cached.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}
