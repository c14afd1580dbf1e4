// Command delivery is the delivery function: fed by the tickets table's
// DynamoDB stream and by a scheduled sweep, it delivers each pending
// ticket to the configured helpdesk. This file only wires: read
// configuration once, build clients once, start.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/aivax-examples/idempotent-callback/internal/app"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
)

func main() {
	logger := app.LambdaLogger()
	h, err := deliverylambda.FromEnv(context.Background(), os.Getenv, logger)
	if err != nil {
		logger.Error("start failed", slog.Any("error", err))
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
