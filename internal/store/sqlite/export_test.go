package sqlite

import "context"

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
