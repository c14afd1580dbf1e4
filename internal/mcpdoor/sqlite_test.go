//go:build !nosqlite

package mcpdoor_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
)

func init() {
	stores["sqlite"] = func(t *testing.T) core.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "tickets.sqlite"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}
