package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// PutOperation writes an operation item as is: for tests that need a
// pending or an expired record.
func (s *Store) PutOperation(ctx context.Context, op core.Operation) error {
	return s.put(ctx, operationItem(op))
}

// operationItem is op's item as the claim writes it.
func operationItem(op core.Operation) map[string]types.AttributeValue {
	return operationAttributes.Item(op.Record())
}
