package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/delivery/benchtest"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
)

// BenchmarkDeliveryLocalWorker: the local server's worker on a SQLite file
// delivering to the fake helpdesk answering in 50 ms (tickets/s, p50/p99
// from commit to delivered).
func BenchmarkDeliveryLocalWorker(b *testing.B) {
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.sqlite"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	benchtest.LocalWorker(b, s)
}
