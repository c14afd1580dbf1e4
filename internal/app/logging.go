package app

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// LambdaLogger is the deployed function's logger: aws-lambda-go's
// lambdacontext logger (requestId on every line) when Lambda's log format
// is JSON, as template.yaml sets it. Under an emulator or a function
// configured for text logs it would write text, so then the same JSON
// lines are written here instead (SPEC section 8 wants JSON everywhere).
func LambdaLogger() *slog.Logger {
	if os.Getenv("AWS_LAMBDA_LOG_FORMAT") == "JSON" {
		return lambdacontext.NewLogger()
	}
	h := slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: lambdacontext.ReplaceAttr})
	return slog.New(requestIDHandler{h})
}

// requestIDHandler adds the Lambda request id, as lambdacontext does.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(a)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
