// Command callback is the AIVAX Protocol Function callback, deployed as a
// Lambda behind a function URL: the AIVAX door on /callback and, when
// configured, the MCP door on /mcp. This file only wires: configuration,
// then the composition root (handler.go), then start. The
// local server is cmd/server, the operator's command cmd/deliveries.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/lambdart"
	"github.com/aivax-examples/idempotent-callback/internal/lambdaurl"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
)

func main() {
	logger := lambdart.NewLogger(config.LogLevel(config.Env))
	cfg, err := config.FromEnv(config.Env)
	if err != nil {
		logger.Error("bad configuration", slog.Any("error", err))
		os.Exit(1)
	}
	tp, err := otelsetup.Setup(context.Background(), otelsetup.Options{Getenv: os.Getenv, Service: "callback", Lambda: true, Logger: logger})
	h, herr := Handler(context.Background(), cfg, logger, tp)
	err = errors.Join(err, herr)
	if err != nil {
		logger.Error("start failed", slog.Any("error", err))
		os.Exit(1)
	}
	lambda.Start(otelsetup.LambdaHandler(tp, lambdaurl.Wrap(h)))
}
