package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/aivax-examples/idempotent-callback/idem"
)

// reasonNone is the cancellation reason of an item whose own check passed
// (the transaction was cancelled for another item). The SDK declares the
// other codes of TransactionCanceledException, as the values of
// types.BatchStatementErrorCodeEnum, but not this one.
const reasonNone = "None"

// errConflict: another transaction touched one of the items. Retried with
// jitter; busy when the retries run out.
var errConflict = errors.New("dynamostore: transaction conflict")

// claimHeld carries the items of the records that may hold the call, as
// the failed conditions of the store's own items returned them: items[i]
// for the store's item i (0 the claim, 1 the check of the other policy's
// key), nil where that item's condition held.
type claimHeld struct {
	items []map[string]types.AttributeValue
}

func (claimHeld) Error() string { return "dynamostore: operation key already claimed" }

// MapError is the one place SDK errors become the store's errors, for
// the store's calls and for a caller's own calls on the same table:
//
//   - the claim's condition failed (item 0) → claimHeld with the stored item;
//   - a condition of the caller's item i failed → *idem.RefusedError{Index: i-1};
//   - a transaction conflict → errConflict (the caller retries);
//   - throttling, timeouts, cancelled contexts, server errors (5xx) and
//     anything else the SDK classifies as retryable, including the joined
//     error it returns when its retry quota runs out → idem.ErrBusy: the
//     outcome is unknown and the caller repeats with the same data;
//   - anything else is returned unchanged.
//
// The SDK's error stays in the chain (%w), for the log and errors.As.
//
// A Claim's own transaction holds one item more ahead of the caller's
// when its record names an AltKey (the check of the other policy's key):
// the store maps it by the same rules with that item as the claim's
// (claimHeld) and the caller's indices counted after it.
func MapError(err error) error { return mapError(err, 1) }

// mapError is MapError for a transaction whose first lead items are the
// store's own: a failed condition of any of them is claimHeld, with the
// items of all of them that failed, before anything of the caller's; of
// the caller's item lead+i a RefusedError with Index i.
func mapError(err error, lead int) error {
	if err == nil {
		return nil
	}
	var cancelled *types.TransactionCanceledException
	if errors.As(err, &cancelled) {
		return mapCancellation(cancelled, lead)
	}
	var (
		conflict   *types.TransactionConflictException
		inProgress *types.TransactionInProgressException
		throughput *types.ProvisionedThroughputExceededException
		limit      *types.RequestLimitExceeded
		throttling *types.ThrottlingException
		attempts   *retry.MaxAttemptsError
		quota      ratelimit.QuotaExceededError
		netErr     net.Error
	)
	switch {
	case errors.As(err, &conflict):
		return errConflict
	case errors.As(err, &inProgress), errors.As(err, &throughput), errors.As(err, &limit),
		errors.As(err, &throttling), errors.As(err, &attempts), errors.As(err, &quota), errors.As(err, &netErr),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		serverFault(err), retryables.IsErrorRetryable(err) == aws.TrueTernary:
		return fmt.Errorf("%w: %w", idem.ErrBusy, err)
	}
	return err
}

// retryables is the SDK's own classification of transient errors (5xx
// status codes, throttling and timeout codes, connection errors).
var retryables = retry.IsErrorRetryables(retry.DefaultRetryables)

// serverFault reports a service error DynamoDB attributes to itself
// (InternalServerError and the like): whether it took effect is unknown.
func serverFault(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorFault() == smithy.FaultServer
}

func mapCancellation(e *types.TransactionCanceledException, lead int) error {
	var held claimHeld
	for i, r := range e.CancellationReasons {
		if i < lead && r.Code != nil && *r.Code == string(types.BatchStatementErrorCodeEnumConditionalCheckFailed) {
			if held.items == nil {
				held.items = make([]map[string]types.AttributeValue, lead)
			}
			held.items[i] = r.Item
		}
	}
	if held.items != nil {
		return held
	}
	conflict := false
	for i, r := range e.CancellationReasons {
		code := ""
		if r.Code != nil {
			code = *r.Code
		}
		switch types.BatchStatementErrorCodeEnum(code) {
		case reasonNone, "":
		case types.BatchStatementErrorCodeEnumConditionalCheckFailed:
			return &idem.RefusedError{Index: i - lead, Err: fmt.Errorf("dynamostore: condition of item %d failed: %w", i-lead, e)}
		case types.BatchStatementErrorCodeEnumTransactionConflict:
			conflict = true
		case types.BatchStatementErrorCodeEnumThrottlingError, types.BatchStatementErrorCodeEnumProvisionedThroughputExceeded:
			return fmt.Errorf("%w: transaction cancelled: %s", idem.ErrBusy, code)
		default:
			return fmt.Errorf("dynamostore: transaction cancelled: %s: %w", code, e)
		}
	}
	if conflict {
		return errConflict
	}
	return fmt.Errorf("dynamostore: transaction cancelled without a reason: %w", e)
}
