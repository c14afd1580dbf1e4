// Package sqlitetest opens the product's SQLite store for tests, and reads
// a store's file from tests outside package sqlite over a connection of
// its own, so the store's type carries only the product's API.
package sqlitetest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/aivax-examples/idempotent-callback/idem/sqlitestore"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
)

// Store opens the product's store at path with o, failing the test when
// it cannot, and closes it when the test ends.
func Store(t testing.TB, path string, o sqlite.Options) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Open opens the database file at path on a connection of the test's own,
// closed when the test ends.
func Open(t testing.TB, path string) *sql.DB {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s.DB()
}

// CountTickets counts the tickets stored in db.
func CountTickets(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM tickets`).Scan(&n)
	return n, err
}
