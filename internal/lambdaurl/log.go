package lambdaurl

// The deployed functions' logger, shared by both Lambda programs: its
// lines carry the invocation ids Wrap puts in each request's context.

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// NewLogger is the deployed function's logger: JSON lines on stdout in
// Lambda's shape (timestamp, level, message; ReplaceAttr from
// lambdacontext), with each request's Lambda requestId and, when the
// invocation is traced, its xrayTraceId (Wrap passes both).
// Lines are JSON whatever AWS_LAMBDA_LOG_FORMAT says (docs/contract.md,
// Logs and metrics, wants JSON everywhere, and EMF needs it);
// level is its level (config.LogLevel: AWS_LAMBDA_LOG_LEVEL).
func NewLogger(level slog.Level) *slog.Logger {
	return slog.New(invocationHandler{slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		Level: level, ReplaceAttr: lambdacontext.ReplaceAttr})})
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
