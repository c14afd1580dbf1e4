package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/benchtest"
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

// BenchmarkDeliveryLocalWorkerLinear: the same worker delivering to the
// fake's Linear API, without faults and with a third of the creates
// failing (helpdesk calls per delivered ticket: creates plus lookups).
func BenchmarkDeliveryLocalWorkerLinear(b *testing.B) {
	for _, faults := range []bool{false, true} {
		name := "no-faults"
		if faults {
			name = "faults"
		}
		b.Run(name, func(b *testing.B) {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.sqlite"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			benchtest.LocalWorkerLinear(b, s, faults)
		})
	}
}
