package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// Create implements core.Store through package idem's DynamoDB store:
// ONE TransactWriteItems puts the operation (completed, with its result)
// if the key is free, checks that the key the call has under the other
// key policy (op.AltKey) holds no live operation of the call's tenant and
// arguments (one that does answers the call, as a repeat), and puts the
// ticket, with its delivery record, if its id is new. Either both items
// are written or neither.
//
// A strongly consistent GetItem of the operation goes out beside the
// transaction (unless Options.NoReadAhead), so a repeat is answered by
// the read, at one read's latency, when it finds a live operation other
// than the one this call writes and not about to expire; otherwise (an
// operation under op.AltKey included: the read is of op.Key only) the
// transaction answers, its failed condition carrying the stored
// operation. A
// new operation or a repeat thus costs two requests and waits for one
// round trip. A TransactionConflict is retried with full jitter, at most
// Options.ConflictRetries times, then answered busy.
func (s *Store) Create(ctx context.Context, op core.Operation, t core.Ticket, now time.Time) (*core.Operation, error) {
	ticket := types.TransactWriteItem{Put: &types.Put{
		TableName:           &s.table,
		Item:                withTraceparent(ticketItem(t), t, tracing.Traceparent(ctx)),
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}
	held, err := s.claims.Claim(ctx, op.Record(), []types.TransactWriteItem{ticket}, now)
	var refused *idem.RefusedError
	switch {
	case errors.As(err, &refused):
		return nil, fmt.Errorf("%w: %w", core.ErrBusy, errTicketExists)
	case err != nil:
		return nil, err
	case held != nil:
		existing := core.OperationOf(*held)
		return &existing, nil
	}
	return nil, nil
}
