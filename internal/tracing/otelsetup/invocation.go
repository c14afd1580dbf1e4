package otelsetup

import (
	"context"
	"fmt"
	"time"
)

// FlushTimeoutEnv names the variable that bounds the span export at the
// end of each Lambda invocation: a Go duration ("300ms"), positive;
// DefaultFlushTimeout when unset.
const FlushTimeoutEnv = "TRACE_FLUSH_TIMEOUT"

// DefaultFlushTimeout is the longest an invocation waits for its spans to
// be exported when FlushTimeoutEnv is unset: a few hundred milliseconds,
// far inside the callback's 10 s timeout, so a collector that hangs costs
// each answer at most that.
const DefaultFlushTimeout = 300 * time.Millisecond

// FlushMargin is kept free between the end of the flush and the Lambda
// deadline: the flush never uses the invocation's last moments, so a
// slow collector cannot turn an answer into a timeout.
const FlushMargin = 200 * time.Millisecond

// flushTimeout reads FlushTimeoutEnv.
func flushTimeout(env func(string) string) (time.Duration, error) {
	v := env(FlushTimeoutEnv)
	if v == "" {
		return DefaultFlushTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("tracing: %s=%q: want a positive duration such as 300ms", FlushTimeoutEnv, v)
	}
	return d, nil
}

// FlushResult is what one flush did with the spans ended since the last.
type FlushResult struct {
	Exported int
	Dropped  int    // not exported: the export failed or timed out, or the buffer was full
	Reason   string // why Dropped is not zero: timeout, refused, rejected, buffer_full
	Err      error  // the exporter's error (its text may quote the collector's answer)
}

// flushBudget is how long the flush at the end of an invocation whose
// context is ctx may take: timeout, cut so that it ends FlushMargin before
// the invocation's deadline; zero when there is no time left.
func flushBudget(ctx context.Context, timeout time.Duration, now time.Time) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if left := dl.Sub(now) - FlushMargin; left < timeout {
			timeout = max(left, 0)
		}
	}
	return timeout
}
