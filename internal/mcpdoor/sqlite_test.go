//go:build !nosqlite

package mcpdoor_test

import (
	"path/filepath"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/sqlitetest"
)

func init() {
	stores["sqlite"] = func(t *testing.T) core.Store {
		return sqlitetest.Store(t, filepath.Join(t.TempDir(), "tickets.sqlite"), sqlite.Options{})
	}
}
