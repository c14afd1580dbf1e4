package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// claimCondition treats an operation whose expires_at has passed as absent:
// TTL deletes lazily, sometimes days late.
const claimCondition = "attribute_not_exists(pk) OR expires_at < :now"

// Create implements core.Store with ONE TransactWriteItems: Put the
// operation (completed, with its result) if the key is free, and Put the
// ticket if its id is new. Either both items are written or neither.
//
// A repeat costs the same single round trip: the failed claim returns the
// stored operation (ReturnValuesOnConditionCheckFailure ALL_OLD) and no
// read follows. A TransactionConflict is retried with full jitter, at most
// Options.ConflictRetries times, then answered busy.
func (s *Store) Create(ctx context.Context, op core.Operation, t core.Ticket, now time.Time) (*core.Operation, error) {
	in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName:                           &s.table,
			Item:                                operationItem(op),
			ConditionExpression:                 aws.String(claimCondition),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": numberAttr(now.Unix())},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		{Put: &types.Put{
			TableName:           &s.table,
			Item:                ticketItem(t),
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}},
	}}
	for attempt := 0; ; attempt++ {
		err := s.call(ctx, func(ctx context.Context) error {
			_, err := s.client.TransactWriteItems(ctx, in)
			return err
		})
		var held claimFailed
		switch {
		case err == nil:
			return nil, nil
		case errors.As(err, &held):
			existing, perr := parseOperation(held.item)
			if perr != nil {
				return nil, perr
			}
			return &existing, nil
		case errors.Is(err, errConflict) && attempt < s.opt.ConflictRetries:
			if werr := s.backoff(ctx, attempt); werr != nil {
				return nil, mapError(werr)
			}
		case errors.Is(err, errConflict):
			return nil, fmt.Errorf("%w: transaction conflict after %d attempts", core.ErrBusy, attempt+1)
		default:
			return nil, err
		}
	}
}

// backoff sleeps a random time up to min(cap, base·2^attempt).
func (s *Store) backoff(ctx context.Context, attempt int) error {
	ceiling := s.opt.ConflictBackoff << min(attempt, 10)
	if ceiling > s.opt.ConflictBackoffMax || ceiling <= 0 {
		ceiling = s.opt.ConflictBackoffMax
	}
	timer := time.NewTimer(rand.N(ceiling) + time.Millisecond) //nolint:gosec // jitter spreads retries; it needs no unpredictability
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
