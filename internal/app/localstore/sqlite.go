//go:build !nosqlite

package localstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
)

// purgeEvery is how often the local server deletes expired operations.
const purgeEvery = 10 * time.Minute

// openSQLite opens the local server's SQLite store, which purges expired
// operations every purgeEvery. The Lambda build leaves SQLite out
// (-tags nosqlite, see nosqlite.go): the deployed function only talks to
// DynamoDB.
// A missing folder on the path is created. An error names the field.
func openSQLite(ctx context.Context, path string, logger *slog.Logger) (core.Store, io.Closer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, nil, fmt.Errorf("config: store.path: %s: cannot create its folder: %w", path, err)
	}
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("config: store.path: %s: cannot open: %w", path, err)
	}
	// The purge runs until the store is closed or the server stops.
	purgeCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(purgeEvery)
		defer t.Stop()
		for {
			select {
			case <-purgeCtx.Done():
				return
			case now := <-t.C:
				if n, err := s.Purge(purgeCtx, now); err != nil {
					logger.Warn("purge failed", slog.Any("error", err))
				} else if n > 0 {
					logger.Info("purged expired operations", slog.Int64("count", n))
				}
			}
		}
	}()
	return s, closerFunc(func() error { cancel(); <-done; return s.Close() }), nil
}

// closerFunc closes by calling itself.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }
