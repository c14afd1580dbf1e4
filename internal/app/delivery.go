package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/deliverylambda"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/webhook"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/zendesk"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/emf"
	"github.com/aivax-examples/idempotent-callback/internal/ssmparam"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
)

// DeliveryHandler builds the delivery function's graph once, at cold
// start: the destination's credentials (from SSM when
// DELIVERY_SECRET_PARAMETER is set), the destination, and
// deliverylambda.Handler (stream and schedule events) → delivery.Engine
// (steps logged with their EMF metrics under METRICS_NAMESPACE) → the
// destination and one DynamoDB client's dynamo.Store on TABLE_NAME.
func DeliveryHandler(ctx context.Context, cfg config.DeliveryLambda, logger *slog.Logger) (*deliverylambda.Handler, error) {
	rec := &emf.Recorder{Namespace: cfg.MetricsNamespace}
	if err := rec.Check(); err != nil {
		return nil, fmt.Errorf("config: METRICS_NAMESPACE: %w", err)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	d := cfg.Destination
	if cfg.SecretParameter != "" {
		secret, err := ssmparam.Read(ctx, ssm.NewFromConfig(awsCfg), cfg.SecretParameter)
		if err != nil {
			return nil, fmt.Errorf("config: DELIVERY_SECRET_PARAMETER %s: %w", cfg.SecretParameter, err)
		}
		if d, err = d.WithSecret(secret); err != nil {
			return nil, err
		}
	}
	dst, err := newDestination(d)
	if err != nil {
		return nil, err
	}
	logger.InfoContext(ctx, "delivery destination", slog.Group("delivery", slog.String("kind", d.Kind),
		slog.String("url", core.RedactRawURL(d.URL)), slog.Bool("lookup", d.Lookup),
		slog.Int("max_attempts", cmp.Or(d.MaxAttempts, delivery.DefaultMaxAttempts)),
		slog.Duration("timeout", cmp.Or(d.Timeout, delivery.DefaultCallTimeout))))
	return deliverylambda.Options{
		Engine: delivery.Engine{MaxAttempts: d.MaxAttempts, Lease: delivery.LeaseFor(d.Timeout),
			CallTimeout: d.Timeout, Log: logger},
		Store:            dynamo.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName, dynamo.Options{}),
		Destination:      dst,
		Log:              logger,
		Metrics:          rec,
		SweepConcurrency: d.SweepConcurrency,
	}.Handler(), nil
}

// newDestination checks d and builds the destination it names: the one
// place that knows every kind. The URL and credential rules are the
// constructors'; a setting they refuse stops the program at start with
// one line naming it as the configuration does (config.Destination.Refused).
// A zero timeout is the clients' own default.
func newDestination(d config.Destination) (delivery.Destination, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	// A failed constructor's nil client must not become a non-nil
	// Destination, hence the explicit checks.
	switch d.Kind {
	case config.DeliveryZendesk:
		c, err := zendesk.New(zendesk.Config{URL: d.URL, Email: d.Email, Token: d.Token, Timeout: d.Timeout})
		if err != nil {
			return nil, refused(d, err)
		}
		return c, nil
	case config.DeliveryWebhook:
		c, err := webhook.New(webhook.Config{URL: d.URL, Secret: d.Secret, Lookup: d.Lookup, Timeout: d.Timeout})
		if err != nil {
			return nil, refused(d, err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("config: delivery.kind: %q is neither zendesk nor webhook", d.Kind)
}

// refused names the setting behind a constructor's error.
func refused(d config.Destination, err error) error {
	var se *httpsend.SettingError
	if errors.As(err, &se) {
		return d.Refused(se.Field, se)
	}
	return fmt.Errorf("config: delivery: %w", err)
}
