package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// ExecForTest runs one statement on the store's database, for tests that
// damage a row as a hand edit would.
func (s *Store) ExecForTest(ctx context.Context, query string, args ...any) error {
	if err := s.lockWrites(ctx); err != nil {
		return err
	}
	defer s.unlockWrites()
	_, err := s.db.ExecContext(ctx, query, args...)
	return err
}

// DB exposes the database to the tests.
func (s *Store) DB() *sql.DB { return s.db }

// endOfTime is a clock at which every operation has expired.
var endOfTime = time.Unix(1<<40, 0)

// PutOperation writes an operation as is, under a claim of its own,
// whatever the key holds (a claim judged at endOfTime replaces any
// record): for tests that need a pending or an expired
// record.
func (s *Store) PutOperation(ctx context.Context, op core.Operation) error {
	_, err := s.claims.Claim(ctx, op.Record(), nil, endOfTime)
	return err
}

// CountTickets counts stored tickets.
func (s *Store) CountTickets(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM tickets`).Scan(&n)
	return n, mapError(err)
}
