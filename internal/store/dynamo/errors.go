package dynamo

import (
	"context"
	"errors"
	"net"

	"github.com/aws/smithy-go"

	"github.com/aivax-examples/idempotent-callback/idem/dynamostore"
)

// mapError makes SDK errors domain errors: the DynamoDB store of package
// idem classifies them (throttling, timeouts, cancelled contexts, server
// errors and whatever the SDK deems retryable → core.ErrBusy, which is
// idem.ErrBusy; anything else unchanged, the SDK's error kept in the
// chain for the log and errors.As).
func mapError(err error) error { return dynamostore.MapError(err) }

// The classes of a failed read-ahead (metrics.ReadAheadClasses).
const (
	ReadAheadAccessDenied = "access_denied"
	ReadAheadThrottled    = "throttled"
	ReadAheadTimeout      = "timeout"
	ReadAheadOther        = "other"
)

// ReadAheadClass classifies a failed read-ahead's error (as
// Options.OnReadAheadError receives it): access_denied when DynamoDB
// refused the role (AccessDeniedException: a template whose role does not
// allow the read), throttled for throttling and capacity errors, timeout
// for a deadline or network timeout, other for anything else.
func ReadAheadClass(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDeniedException":
			return ReadAheadAccessDenied
		case "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded":
			return ReadAheadThrottled
		}
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
		return ReadAheadTimeout
	}
	return ReadAheadOther
}
