// Command delivery is the delivery function: fed by the tickets table's
// DynamoDB stream and by a scheduled sweep, it delivers each pending
// ticket to the configured helpdesk. This file only wires: configuration,
// then the composition root (handler.go), then start.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/lambdart"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
)

func main() {
	logger := lambdart.NewLogger(config.LogLevel(config.Env))
	cfg, err := config.DeliveryFromEnv(config.Env)
	if err != nil {
		logger.Error("start failed", slog.Any("error", err))
		os.Exit(1)
	}
	var h *deliverylambda.Handler
	tp, err := otelsetup.Setup(context.Background(), otelsetup.Options{Getenv: os.Getenv, Service: "delivery", Lambda: true, Logger: logger})
	if err == nil {
		h, err = Handler(context.Background(), cfg, logger, tp)
	}
	if err != nil {
		logger.Error("start failed", slog.Any("error", err))
		os.Exit(1)
	}
	lambda.Start(otelsetup.LambdaHandler(tp, h.Handle))
}
