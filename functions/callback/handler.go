package main

// This file is the callback function's composition root: it builds the
// graph main starts (the AIVAX door and the MCP door on DynamoDB), and
// links no helpdesk client and no operator code.
//
// Lambda freezes the process as soon as an invocation returns, so
// everything a request needs is finished before the handler returns (the
// claim's read-ahead included: settled), and nothing relies on a
// goroutine running between invocations (docs/lambda-runtime.md).

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"go.opentelemetry.io/otel/trace"

	"github.com/aivax-examples/idempotent-callback/internal/app/doors"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/lambdart"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

// Handler builds the deployed callback function's handler: the shared
// settings checked (doors.CheckSettings), the hook key (from SSM when
// HOOK_KEY_PARAMETER is set, checked when read), one DynamoDB client, and
// on it the graph of handler; tp records the door's and the AWS requests'
// spans (nil: none). It runs once, at cold start.
func Handler(ctx context.Context, cfg config.Lambda, logger *slog.Logger, tp *otelsetup.Provider) (http.Handler, error) {
	s, err := doors.CheckSettings(cfg.Common, cfg.HookKey, config.SettingEnvNames)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	tp.AWS(&awsCfg, dynamo.IsReadAhead) // a span per AWS request
	if cfg.HookKeyParameter != "" {
		key, err := readParameter(ctx, ssm.NewFromConfig(awsCfg), cfg.HookKeyParameter)
		if err != nil {
			return nil, err
		}
		if s.HookKey, err = doors.CheckHookKey(key, "HOOK_KEY_PARAMETER "+cfg.HookKeyParameter); err != nil {
			return nil, err
		}
	}
	return handler(cfg, s, dynamodb.NewFromConfig(awsCfg), logger, tp.TracerProvider())
}

// handler is the callback function's graph on a DynamoDB client,
// outermost first: httpapi.Collect (each request's store calls, for its
// line) → doors.Build (httpapi.Handler with EMF metrics in each request's
// line, and with MCP_ISSUER and MCP_AUDIENCE the MCP door on /mcp beside
// it) → core.Service → core.TimedStore → dynamo.Store, and for users
// usercache → core.TimedUsers → the same dynamo.Store. The service keeps
// completed operations in memory (RESULT_CACHE_SIZE, doors.ResultCache),
// so a repeat landing on a warm instance makes no DynamoDB call. With
// DELIVERY_KIND set, the service writes each new ticket pending in the
// same transaction (the outbox). s are cfg's shared settings and the hook
// key, checked.
func handler(cfg config.Lambda, s doors.Settings, client *dynamodb.Client, logger *slog.Logger, tp trace.TracerProvider) (http.Handler, error) {
	auth, err := doors.Authenticator(s, false, logger)
	if err != nil {
		return nil, err
	}
	rec := &metrics.EMF{Namespace: cfg.MetricsNamespace, CallbackLabels: httpapi.MetricLabels(nil)}
	if err := rec.Check(); err != nil {
		return nil, fmt.Errorf("config: METRICS_NAMESPACE: %w", err)
	}
	// A failed read-ahead is counted in the EMF metrics and logged once
	// per process (metrics.ReadAheadReporter).
	store := dynamo.Product(client, cfg.TableName, cfg.CallTimeout,
		metrics.ReadAheadReporter(func() metrics.Recorder { return rec }, logger, dynamo.ReadAheadClass))
	h, err := doors.Build(doors.Config{
		Store:    core.TimedStore{Store: store, Observe: rec.StoreCall},
		Users:    usercache.New(core.TimedUsers{Users: store, Observe: rec.StoreCall}, cfg.UserCacheTTL, cfg.UserCacheSize),
		Settings: s,
		MCP:      cfg.MCP,
		MCPNames: config.MCPEnvNames,
		Auth:     auth,
		Deliver:  cfg.Deliver,
		Metrics:  rec,
		Logger:   logger,

		ResultCache: doors.ResultCache(cfg.ResultCacheSize),
	})
	if err != nil {
		return nil, err
	}
	return tracing.Door(settled(httpapi.Collect(h), store.Wait), tp), nil
}

// settled serves each request with h, then waits (wait: the store's
// dynamo.Store.Wait) for the DynamoDB requests its claims sent and did not
// wait for: the read-ahead's GetItem after the transaction answered, or
// the transaction after the read answered a repeat. Lambda freezes the
// process as soon as the handler returns, so such a request would
// otherwise stop mid-flight and end on a later invocation's thaw (or
// never): its span ending then and exported with another invocation, a
// read that ran past its call timeout while frozen counted as a failed
// read-ahead. Waiting costs a repeat the read answered the rest of its
// transaction's time; nothing else waits longer (docs/lambda-runtime.md).
// The function serves one invocation at a time, so what Wait waits for is
// this request's.
func settled(h http.Handler, wait func()) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		wait()
	})
}

// readParameter reads the hook key's SSM parameter (lambdart.ReadParameter: one
// trailing line break trimmed, the value never in an error).
func readParameter(ctx context.Context, c lambdart.ParameterGetter, name string) (string, error) {
	key, err := lambdart.ReadParameter(ctx, c, name)
	if err != nil {
		return "", fmt.Errorf("HOOK_KEY_PARAMETER %s: %w", name, err)
	}
	return key, nil
}
