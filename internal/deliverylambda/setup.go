package deliverylambda

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
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/dest"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/emf"
	"github.com/aivax-examples/idempotent-callback/internal/ssmparam"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
)

// FromEnv builds the handler once, at cold start: the destination from
// DELIVERY_* (its credentials read from SSM when DELIVERY_SECRET_PARAMETER
// is set), one DynamoDB client on TABLE_NAME, the engine, and the EMF
// metrics under METRICS_NAMESPACE (emf.DefaultNamespace when unset).
func FromEnv(ctx context.Context, getenv func(string) string, log *slog.Logger) (*Handler, error) {
	table := getenv("TABLE_NAME")
	if table == "" {
		return nil, errors.New("config: TABLE_NAME is required")
	}
	rec := &emf.Recorder{Namespace: cmp.Or(getenv("METRICS_NAMESPACE"), emf.DefaultNamespace)}
	if err := rec.Check(); err != nil {
		return nil, fmt.Errorf("config: METRICS_NAMESPACE: %w", err)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	cfg, ok, err := config.DeliveryFromEnv(getenv, func(name string) (string, error) {
		return ssmparam.Read(ctx, ssm.NewFromConfig(awsCfg), name)
	})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("config: DELIVERY_KIND is none or empty: this function has nothing to deliver to")
	}
	dst, err := dest.New(cfg)
	if err != nil {
		return nil, err
	}
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg), table, dynamo.Options{})
	log.InfoContext(ctx, "delivery destination", slog.Any("delivery", cfg))
	h := NewWithMetrics(delivery.Engine{MaxAttempts: cfg.MaxAttempts, Lease: delivery.LeaseFor(cfg.Timeout),
		CallTimeout: cfg.Timeout, Log: log}, store, dst, log, rec)
	h.SweepConcurrency, h.CallTimeout = cfg.SweepConcurrency, cfg.Timeout
	return h, nil
}
