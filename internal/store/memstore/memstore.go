// Package memstore is a fixed, in-memory core.Users: the local server's
// users from its config file. The in-memory core.Store for tests is
// package memtest.
package memstore

import (
	"context"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// Compile-time check: the domain's user directory.
var _ core.Users = Users(nil)

// Users is a fixed set of users, keyed by externalUserId.
type Users map[string]core.User

// User implements core.Users.
func (u Users) User(_ context.Context, externalID string) (core.User, error) {
	user, ok := u[externalID]
	if !ok {
		return core.User{}, core.ErrNotFound
	}
	user.ExternalID = externalID
	return user, nil
}
