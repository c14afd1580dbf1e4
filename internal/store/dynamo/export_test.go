package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// PutOperation writes an operation item as is: for tests that need a
// pending or an expired record.
func (s *Store) PutOperation(ctx context.Context, op idem.Record) error {
	return s.put(ctx, operationItem(op))
}

// operationItem is op's item as the claim writes it.
func operationItem(op idem.Record) map[string]types.AttributeValue {
	return operationAttributes.Item(op)
}
