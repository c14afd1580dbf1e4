// Package lambdart is what both deployed functions take from the Lambda
// runtime besides their events: the logger (NewLogger: JSON lines in
// Lambda's shape carrying each invocation's ids) and the reader of the
// SSM parameters they take their secrets from at cold start
// (ReadParameter). The local programs link neither; the callback's
// function URL adapter is internal/lambdaurl.
package lambdart

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Invocation identifies the Lambda invocation that carried a request, for
// its log lines: the Lambda request id and the X-Ray trace id, so that one
// callback's lines can be found together and beside its trace.
type Invocation struct {
	RequestID string
	TraceID   string // "" when the invocation carries no trace header
}

type invocationKey struct{}

// WithInvocation returns ctx carrying inv, for the logger's lines (the
// function URL adapter sets it for each request).
func WithInvocation(ctx context.Context, inv Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationFrom returns the invocation a request's context came from.
func InvocationFrom(ctx context.Context) (Invocation, bool) {
	inv, ok := ctx.Value(invocationKey{}).(Invocation)
	return inv, ok
}

// NewLogger is the deployed function's logger: JSON lines on stdout in
// Lambda's shape (timestamp, level, message; ReplaceAttr from
// lambdacontext), with each request's Lambda requestId and, when the
// invocation is traced, its xrayTraceId (from WithInvocation; the invocation's context alone gives the requestId).
// Lines are JSON whatever AWS_LAMBDA_LOG_FORMAT says (docs/contract.md,
// Logs and metrics, wants JSON everywhere, and EMF needs it);
// level is its level (config.LogLevel: AWS_LAMBDA_LOG_LEVEL).
func NewLogger(level slog.Level) *slog.Logger {
	return slog.New(LogHandler(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		Level: level, ReplaceAttr: lambdacontext.ReplaceAttr})))
}

// LogHandler is h with each request's invocation ids added, as
// NewLogger's lines have them.
func LogHandler(h slog.Handler) slog.Handler { return invocationHandler{h} }

// invocationHandler adds the invocation's ids to each line logged with a
// request's context.
type invocationHandler struct{ slog.Handler }

func (h invocationHandler) Handle(ctx context.Context, r slog.Record) error {
	if inv, ok := InvocationFrom(ctx); ok {
		r.AddAttrs(slog.String("requestId", inv.RequestID))
		if inv.TraceID != "" {
			r.AddAttrs(slog.String("xrayTraceId", inv.TraceID))
		}
	} else if lc, ok := lambdacontext.FromContext(ctx); ok {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h invocationHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return invocationHandler{h.Handler.WithAttrs(a)}
}

func (h invocationHandler) WithGroup(name string) slog.Handler {
	return invocationHandler{h.Handler.WithGroup(name)}
}
