//go:build !nosqlite

package app

import (
	"context"
	"io"
	"log/slog"
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
func openSQLite(ctx context.Context, path string, logger *slog.Logger) (core.Store, io.Closer, error) {
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return nil, nil, err
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
