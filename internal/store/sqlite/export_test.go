package sqlite

import (
	"context"
	"database/sql"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// ExecForTest runs one statement on the store's database, for tests that
// damage a row as a hand edit would.
func (s *Store) ExecForTest(ctx context.Context, query string, args ...any) error {
	_, err := s.exec(ctx, query, args...)
	return err
}

// DB exposes the database to the tests.
func (s *Store) DB() *sql.DB { return s.db }

// PutOperation writes an operation as is, under a claim of its own judged
// at the operation's CreatedAt: for tests that need a pending record on a
// free key. The store refuses a record that could not hold its key
// (idem.Record.Check), an expired one included.
func (s *Store) PutOperation(ctx context.Context, op idem.Record) error {
	_, err := s.claims.Claim(ctx, op, nil, op.CreatedAt)
	return err
}

// CountTickets counts stored tickets.
func (s *Store) CountTickets(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM tickets`).Scan(&n)
	return n, mapError(err)
}
