package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// Cancellation reason codes of TransactionCanceledException. DynamoDB
// reports them only as these strings, one per item of the transaction.
const (
	reasonNone              = "None"
	reasonConditionFailed   = "ConditionalCheckFailed"
	reasonConflict          = "TransactionConflict"
	reasonThrottled         = "ThrottlingError"
	reasonThroughputExceeds = "ProvisionedThroughputExceeded"
)

// errConflict: another transaction touched one of our items. Retried with
// jitter; becomes busy when the retries run out.
var errConflict = errors.New("dynamo: transaction conflict")

// errTicketExists: the ticket item's condition failed, i.e. a ticket id was
// reused. Nothing was written.
var errTicketExists = errors.New("dynamo: ticket id already exists")

// claimFailed carries the operation item that holds the key.
type claimFailed struct {
	item map[string]types.AttributeValue
}

func (claimFailed) Error() string { return "dynamo: operation key already claimed" }

// mapError is the one place SDK errors become domain errors:
//
//   - the claim's condition failed → claimFailed with the stored item;
//   - the ticket's condition failed → errTicketExists;
//   - a transaction conflict → errConflict (the caller retries);
//   - throttling, timeouts, cancelled contexts, exhausted SDK retries of a
//     transient failure → core.ErrBusy: the outcome is unknown and the
//     caller retries with the same data;
//   - anything else is returned unchanged and answers 500.
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
		netErr     net.Error
	)
	switch {
	case errors.As(err, &conflict):
		return errConflict
	case errors.As(err, &inProgress), errors.As(err, &throughput), errors.As(err, &limit),
		errors.As(err, &throttling), errors.As(err, &attempts), errors.As(err, &netErr),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %v", core.ErrBusy, err)
	}
	return err
}

func mapCancellation(e *types.TransactionCanceledException) error {
	conflict := false
	for i, r := range e.CancellationReasons {
		code := ""
		if r.Code != nil {
			code = *r.Code
		}
		switch code {
		case reasonNone, "":
		case reasonConditionFailed:
			if i == 0 {
				return claimFailed{item: r.Item}
			}
			return errTicketExists
		case reasonConflict:
			conflict = true
		case reasonThrottled, reasonThroughputExceeds:
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
