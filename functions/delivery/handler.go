package main

// This file is the delivery function's composition root: it builds the
// graph main starts, and links no HTTP door, nonce check or operator code.
//
// Lambda freezes the process as soon as an invocation returns: each
// stream batch and sweep (internal/deliverylambda) waits for every
// delivery it started, recorded, before it answers, and nothing relies on
// a goroutine running between invocations (docs/lambda-runtime.md).

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/lambdart"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

// Handler builds the delivery function's graph once, at cold
// start: the destination's credentials (from SSM when
// DELIVERY_SECRET_PARAMETER is set), the destination, and
// deliverylambda.Handler (stream and schedule events) → delivery.Engine
// (steps logged with their EMF metrics under METRICS_NAMESPACE) → the
// destination and one DynamoDB client's dynamo.Store on TABLE_NAME; tp
// records the AWS requests' spans (nil: none).
func Handler(ctx context.Context, cfg config.DeliveryLambda, logger *slog.Logger, tp *otelsetup.Provider) (*deliverylambda.Handler, error) {
	rec := &metrics.EMF{Namespace: cfg.MetricsNamespace, DeliveryLabels: destination.MetricLabels()}
	if err := rec.Check(); err != nil {
		return nil, fmt.Errorf("config: METRICS_NAMESPACE: %w", err)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	tp.AWS(&awsCfg, nil) // a span per AWS request
	d := cfg.Destination
	if cfg.SecretParameter != "" {
		secret, err := lambdart.ReadParameter(ctx, ssm.NewFromConfig(awsCfg), cfg.SecretParameter)
		if err != nil {
			return nil, fmt.Errorf("config: DELIVERY_SECRET_PARAMETER %s: %w", cfg.SecretParameter, err)
		}
		if d, err = d.WithSecret(secret); err != nil {
			return nil, err
		}
	}
	dst, err := destination.New(d)
	if err != nil {
		return nil, err
	}
	logger.InfoContext(ctx, "delivery destination", slog.Group("delivery", slog.String("kind", d.Kind),
		slog.String("url", urls.RedactedRaw(d.URL)), slog.Bool("lookup", d.Lookup),
		slog.Int("max_attempts", cmp.Or(d.MaxAttempts, delivery.DefaultMaxAttempts)),
		slog.Duration("timeout", cmp.Or(d.Timeout, delivery.DefaultCallTimeout))))
	engine := destination.Engine(d)
	engine.Log = logger
	return deliverylambda.Options{
		Engine:           engine,
		Store:            dynamo.Product(dynamodb.NewFromConfig(awsCfg), cfg.TableName, 0, nil),
		Destination:      dst,
		Log:              logger,
		Metrics:          rec,
		SweepConcurrency: d.SweepConcurrency,
	}.Handler(), nil
}
