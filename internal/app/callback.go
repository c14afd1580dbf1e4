package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/emf"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/ssmparam"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

// CallbackHandler builds the deployed callback function's handler: the
// hook key (from SSM when HOOK_KEY_PARAMETER is set), one DynamoDB client,
// and on it the graph of callbackHandler. It runs once, at cold start.
func CallbackHandler(ctx context.Context, cfg config.Lambda, logger *slog.Logger) (http.Handler, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	hookKey := cfg.HookKey
	if cfg.HookKeyParameter != "" {
		if hookKey, err = readParameter(ctx, ssm.NewFromConfig(awsCfg), cfg.HookKeyParameter); err != nil {
			return nil, err
		}
	}
	return callbackHandler(cfg, dynamodb.NewFromConfig(awsCfg), hookKey, logger)
}

// callbackHandler is the callback function's graph on a DynamoDB client,
// outermost first: metrics.Collect (each request's store calls, for its
// line) → httpapi.Handler (EMF metrics in each request's line) →
// core.Service → metrics.TimedStore → dynamo.Store, and for users
// usercache → metrics.TimedUsers → the same dynamo.Store. With
// DELIVERY_KIND set, the service writes each new ticket pending in the
// same transaction (the outbox). With MCP_ISSUER and MCP_AUDIENCE, the MCP
// door serves /mcp on the same service, beside httpapi.Handler.
func callbackHandler(cfg config.Lambda, client *dynamodb.Client, hookKey string, logger *slog.Logger) (http.Handler, error) {
	auth, err := authenticator(hookKey, false, cfg.Common, logger)
	if err != nil {
		return nil, err
	}
	rec := &emf.Recorder{Namespace: cfg.MetricsNamespace}
	if err := rec.Check(); err != nil {
		return nil, fmt.Errorf("config: METRICS_NAMESPACE: %w", err)
	}
	store := dynamo.New(client, cfg.TableName, dynamo.Options{CallTimeout: cfg.CallTimeout})
	svc := &core.Service{
		Store:     metrics.TimedStore{Store: store, Recorder: rec},
		Users:     usercache.New(metrics.TimedUsers{Users: store, Recorder: rec}, cfg.UserCacheTTL, cfg.UserCacheSize),
		Policy:    cfg.Policy,
		Retention: cfg.Retention,
		NewID:     uuid.NewString,
		Deliver:   cfg.Deliver,
	}
	h, err := withMCP(&httpapi.Handler{
		Service:   svc,
		Auth:      auth,
		MaxBody:   cfg.MaxBodyBytes,
		Logger:    logger,
		PublicURL: cfg.PublicURL,
		Metrics:   rec,
	}, cfg.MCP, svc, cfg.MaxBodyBytes, rec, logger)
	if err != nil {
		return nil, err
	}
	return metrics.Collect(h), nil
}

// readParameter reads the hook key's SSM parameter (ssmparam.Read: one
// trailing line break trimmed, the value never in an error).
func readParameter(ctx context.Context, c ssmparam.Getter, name string) (string, error) {
	key, err := ssmparam.Read(ctx, c, name)
	if err != nil {
		return "", fmt.Errorf("HOOK_KEY_PARAMETER %s: %w", name, err)
	}
	return key, nil
}

// authenticator fails closed: no hook key and no explicit insecure switch
// means every callback is refused.
func authenticator(hookKey string, insecure bool, c config.Common, logger *slog.Logger) (httpapi.Authenticator, error) {
	switch {
	case insecure:
		logger.Warn("insecure_no_auth is set: callbacks are NOT authenticated; use this only on loopback")
		return nonce.Off{}, nil
	case hookKey == "":
		logger.Error("no hook key configured: every callback is refused (fail closed)")
		return nonce.Refuse{}, nil
	}
	v, err := nonce.New(hookKey, c.MinCost, c.MaxCost)
	if err != nil {
		return nil, fmt.Errorf("hook key: %w", err)
	}
	return v, nil
}
