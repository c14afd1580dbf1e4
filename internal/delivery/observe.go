package delivery

import (
	"context"
	"errors"
	"time"
)

// Result is how one recorded delivery step ended, as it is counted:
// delivered, failed or unknown (the final states), retried (the ticket
// went back to pending for another attempt), or misconfigured (the ticket
// went back to pending because the destination refused our credentials or
// URL, on this step's call or on an earlier one that paused delivery).
// The values are the state label's values of the delivery metrics.
type Result string

// The results of a step. The three final states are counted by their
// state's name.
const (
	ResultDelivered        = Result(StateDelivered)
	ResultFailed           = Result(StateFailed)
	ResultUnknown          = Result(StateUnknown)
	ResultRetried   Result = "retried"
	// ResultMisconfigured: the step ended because the destination refused
	// our credentials or URL (401, 403, 404 on create); the ticket stays
	// pending.
	ResultMisconfigured Result = "misconfigured"
	// ResultWaiting: an effect waits for its ticket, or the record before
	// it, to be delivered; no attempt was counted.
	ResultWaiting Result = "waiting"
)

// Results are the results, in the order the metrics list them.
var Results = []Result{ResultDelivered, ResultFailed, ResultUnknown, ResultRetried, ResultMisconfigured, ResultWaiting}

// Step is one delivery step as an Observer sees it once it is recorded.
// TicketID is for the log line that reports the step; it is never a metric
// label.
type Step struct {
	TicketID string
	// Kind is the record's kind: KindTicket, or its effect's ("comment",
	// "close", a tool's own); a metric label.
	Kind string
	// Update is what was recorded: the state, the attempts, the error, the
	// next due time of a retried ticket, the receipt of a delivered one.
	Update
	Result Result
	// Lag is the time from the ticket's commit (its CreatedAt) to its
	// delivery; only for ResultDelivered, never negative.
	Lag time.Duration
}

// Observer is told how each delivery step ended. The Engine calls it after
// the step's outcome is recorded, on the delivering goroutine, so it must
// be quick and must not block; a step that was not recorded (the lease was
// lost, the store failed) is not reported: it is not over.
type Observer interface {
	StepEnded(ctx context.Context, s Step)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, s Step)

// StepEnded calls f.
func (f ObserverFunc) StepEnded(ctx context.Context, s Step) { f(ctx, s) }

// resultOf maps a recorded state to its result.
func resultOf(st State) Result {
	switch st {
	case StateDelivered:
		return ResultDelivered
	case StateFailed:
		return ResultFailed
	case StateUnknown:
		return ResultUnknown
	}
	return ResultRetried // pending: another attempt follows
}

// WaitingCounter is a Store that counts its waiting tickets: those with a
// live delivery, pending (due now or backing off before a retry) or
// delivering under a lease. It reads only the index of live deliveries,
// never the whole table, and is still a read per call: the runners count
// at most once per sweep.
type WaitingCounter interface {
	Waiting(ctx context.Context) (int, error)
}

// ErrNoCount: the store cannot count its waiting tickets.
var ErrNoCount = errors.New("delivery: the store cannot count waiting tickets")

// CountWaiting counts the waiting tickets of s, or returns ErrNoCount when
// s is not a WaitingCounter.
func CountWaiting(ctx context.Context, s Outbox) (int, error) {
	c, ok := s.(WaitingCounter)
	if !ok {
		return 0, ErrNoCount
	}
	return c.Waiting(ctx)
}
