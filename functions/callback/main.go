// Command callback is the AIVAX Protocol Function callback: a Lambda behind
// a function URL when AWS_LAMBDA_RUNTIME_API is set, otherwise a local HTTP
// server (go run ./functions/callback -config config.json), which also
// delivers tickets when the file has a delivery block. `-config FILE
// deliveries ...` is the operator's command on the same store (list, show,
// retry, resolve). This file only wires: configuration, then the
// composition root (internal/app), then start.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/aivax-examples/idempotent-callback/internal/app"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/lambdaurl"
)

func main() {
	if !config.InLambda(config.Env) {
		os.Exit(app.RunLocal(os.Args[1:]))
	}
	logger := app.LambdaLogger(config.LogLevel(config.Env))
	cfg, err := config.FromEnv(config.Env)
	if err != nil {
		logger.Error("bad configuration", slog.Any("error", err))
		os.Exit(1)
	}
	h, err := app.CallbackHandler(context.Background(), cfg, logger)
	if err != nil {
		logger.Error("start failed", slog.Any("error", err))
		os.Exit(1)
	}
	lambda.Start(lambdaurl.Wrap(h))
}
