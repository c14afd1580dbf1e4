package dynamostore

import (
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// Decides exposes the read-ahead rule to the tests.
func (s *Store) Decides(found, mine idem.Record, now time.Time) bool {
	return s.decides(found, mine, now)
}
