package dynamo

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

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// reasonNone is the cancellation reason of an item whose own check passed
// (the transaction was cancelled for another item). The SDK declares the
// other codes of TransactionCanceledException, as the values of
// types.BatchStatementErrorCodeEnum, but not this one.
const reasonNone = "None"

// errConflict: another transaction touched one of our items. Retried with
// jitter; becomes busy when the retries run out.
var errConflict = errors.New("dynamo: transaction conflict")

// errTicketExists: the ticket item's condition failed while the claim's
// held. The ticket id is fresh for each call and reused only by the SDK's
// own retries of the same transaction, so this can only mean an earlier
// attempt of ours committed (and its operation has since expired, or the
// claim was otherwise free again): the outcome is unknown to this attempt,
// and it is answered busy; the caller's repeat returns the stored result.
var errTicketExists = errors.New("dynamo: ticket id already exists")

// claimFailed carries the operation item that holds the key.
type claimFailed struct {
	item map[string]types.AttributeValue
}

func (claimFailed) Error() string { return "dynamo: operation key already claimed" }

// mapError is the one place SDK errors become domain errors:
//
//   - the claim's condition failed → claimFailed with the stored item;
//   - the ticket's condition failed → core.ErrBusy (see errTicketExists);
//   - a transaction conflict → errConflict (the caller retries);
//   - throttling, timeouts, cancelled contexts, server errors (5xx) and
//     anything else the SDK classifies as retryable, including the joined
//     error it returns when its retry quota runs out → core.ErrBusy: the
//     outcome is unknown and the caller retries with the same data;
//   - anything else is returned unchanged and answers 500.
//
// The SDK's error stays in the chain (%w), for the log and errors.As.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var cancelled *types.TransactionCanceledException
	if errors.As(err, &cancelled) {
		return mapCancellation(cancelled)
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
		return fmt.Errorf("%w: %w", core.ErrBusy, err)
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

func mapCancellation(e *types.TransactionCanceledException) error {
	conflict := false
	for i, r := range e.CancellationReasons {
		code := ""
		if r.Code != nil {
			code = *r.Code
		}
		switch types.BatchStatementErrorCodeEnum(code) {
		case reasonNone, "":
		case types.BatchStatementErrorCodeEnumConditionalCheckFailed:
			if i == 0 {
				return claimFailed{item: r.Item}
			}
			return fmt.Errorf("%w: %w", core.ErrBusy, errTicketExists)
		case types.BatchStatementErrorCodeEnumTransactionConflict:
			conflict = true
		case types.BatchStatementErrorCodeEnumThrottlingError, types.BatchStatementErrorCodeEnumProvisionedThroughputExceeded:
			return fmt.Errorf("%w: transaction cancelled: %s", core.ErrBusy, code)
		default:
			return fmt.Errorf("dynamo: transaction cancelled: %s", code)
		}
	}
	if conflict {
		return errConflict
	}
	return fmt.Errorf("dynamo: transaction cancelled without a reason")
}
