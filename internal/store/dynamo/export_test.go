package dynamo

import (
	"context"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// PutOperation writes an operation item as is: for tests that need a
// pending or an expired record.
func (s *Store) PutOperation(ctx context.Context, op core.Operation) error {
	return s.put(ctx, operationItem(op))
}
