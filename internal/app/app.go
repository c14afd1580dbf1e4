// Package app assembles the product from its parts: configuration in,
// an http.Handler out. functions/callback/main.go only calls it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/dest"
	"github.com/aivax-examples/idempotent-callback/internal/helpdesk/httpsend"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/emf"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/ssmparam"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/usercache"
)

// LambdaHandler builds the deployed function's handler: the hook key
// (from SSM when HOOK_KEY_PARAMETER is set), one DynamoDB client, the
// store, the user cache. It runs once, at cold start.
func LambdaHandler(ctx context.Context, cfg config.Lambda, logger *slog.Logger) (http.Handler, error) {
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
	return lambdaHandler(cfg, dynamodb.NewFromConfig(awsCfg), hookKey, logger)
}

// lambdaHandler builds the deployed handler on a DynamoDB client: the
// store, the user cache, and EMF metrics in each request's log line.
func lambdaHandler(cfg config.Lambda, client *dynamodb.Client, hookKey string, logger *slog.Logger) (http.Handler, error) {
	auth, err := authenticator(hookKey, false, cfg.Common, logger)
	if err != nil {
		return nil, err
	}
	rec := &emf.Recorder{Namespace: cfg.MetricsNamespace}
	if err := rec.Check(); err != nil {
		return nil, fmt.Errorf("config: METRICS_NAMESPACE: %w", err)
	}
	store := dynamo.New(client, cfg.TableName, dynamo.Options{CallTimeout: cfg.CallTimeout})
	users := usercache.New(metrics.TimedStore{Users: store, Recorder: rec}, cfg.UserCacheTTL, cfg.UserCacheSize)
	h := handler(cfg.Common, store, users, auth, logger)
	h.Service.Deliver = cfg.Deliver // the outbox: written pending by the same transaction
	return h.Instrument(rec), nil
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

func handler(c config.Common, store core.Store, users core.Users, auth httpapi.Authenticator, logger *slog.Logger) *httpapi.Handler {
	return &httpapi.Handler{
		Service: &core.Service{
			Store: store, Users: users, Policy: c.Policy, Retention: c.Retention,
			NewID: uuid.NewString,
		},
		Auth:      auth,
		MaxBody:   c.MaxBodyBytes,
		Logger:    logger,
		PublicURL: c.PublicURL,
	}
}

// LocalHandler builds the local server's handler on the configured store.
// With a delivery block, the service writes every new ticket pending, and a
// delivery worker runs on the same store until ctx ends: woken after each
// commit, polling for due tickets, and resuming at once whatever a previous
// process left pending or delivering. With metrics_listen, Prometheus
// serves /metrics there, with the callbacks and the worker's deliveries
// (each step's result, the lag of delivered tickets, the tickets waiting).
// The returned closer stops, in order, the metrics
// listener, the worker (its deliveries in flight finish first) and the
// store.
func LocalHandler(ctx context.Context, cfg config.Local, logger *slog.Logger) (http.Handler, io.Closer, error) {
	auth, err := authenticator(cfg.HookKey, cfg.InsecureNoAuth, cfg.Common, logger)
	if err != nil {
		return nil, nil, err
	}
	users := memstore.Users{}
	for id, u := range cfg.Users {
		users[id] = core.User{ExternalID: id, TenantID: u.TenantID, UserID: u.UserID, Disabled: u.Disabled}
	}
	var dst delivery.Destination
	if cfg.Delivery != nil {
		if dst, err = dest.New(*cfg.Delivery); err != nil {
			return nil, nil, err
		}
	}
	store, storeCloser, err := OpenStore(ctx, cfg.Store, logger)
	if err != nil {
		return nil, nil, err
	}
	h := handler(cfg.Common, store, users, auth, logger)
	var rec metrics.Recorder
	var metricsSrv io.Closer
	if cfg.MetricsListen != "" {
		if rec, metricsSrv, err = servePrometheus(cfg.MetricsListen, logger); err != nil {
			_ = storeCloser.Close()
			return nil, nil, err
		}
	}
	var cs closers
	if metricsSrv != nil {
		// The metrics server closes first: after the callback server, so
		// the last requests are counted.
		cs = append(cs, metricsSrv)
	}
	if dst != nil {
		ds, ok := store.(delivery.Store)
		if !ok {
			_ = append(cs, storeCloser).Close()
			return nil, nil, fmt.Errorf("config: delivery: store %s cannot deliver", cfg.Store.Kind)
		}
		d := *cfg.Delivery // zero MaxAttempts and Timeout are the engine's and adapters' defaults
		w := &delivery.Worker{Log: logger, Engine: &delivery.Engine{Store: ds, Destination: dst,
			MaxAttempts: d.MaxAttempts, Lease: delivery.LeaseFor(d.Timeout), CallTimeout: d.Timeout, Log: logger}}
		if rec != nil {
			observeDeliveries(w, rec, cfg.Store.Kind)
		}
		h.Service.Store = delivery.NotifyOnCommit(store, w.Notify)
		h.Service.Deliver = true
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = w.Run(wctx)
		}()
		// Kind and host only: the URL's path or query and the credentials
		// may hold secrets.
		logger.Info("delivering tickets", slog.String("kind", d.Kind), slog.String("url", httpsend.RedactRaw(d.URL)))
		cs = append(cs, closerFunc(func() error {
			stop()
			<-done
			logger.Info("delivery worker stopped")
			return nil
		}))
	}
	cs = append(cs, storeCloser)
	if rec == nil {
		return h, cs, nil
	}
	return h.Instrument(rec), cs, nil
}

// dynamoCountEvery spaces the local worker's counts of waiting tickets on
// DynamoDB, where each count is a Query: once a minute, as the deployed
// scheduled sweep counts. On SQLite a count is one read of an index, made
// after every sweep.
const dynamoCountEvery = time.Minute

// observeDeliveries reports w's steps and its counts of waiting tickets to
// rec (the local server's Prometheus).
func observeDeliveries(w *delivery.Worker, rec metrics.Recorder, storeKind string) {
	w.Engine.Observer = delivery.ObserverFunc(func(ctx context.Context, s delivery.Step) {
		rec.Delivery(ctx, metrics.Delivery{State: string(s.Result), Lag: s.Lag})
	})
	w.Waiting = func(ctx context.Context, n int) { rec.TicketsWaiting(ctx, n) }
	if storeKind == "dynamodb" {
		w.CountEvery = dynamoCountEvery
	}
}

// closers closes each in order and returns the first error.
type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// OpenStore opens the local configuration's store (SQLite or DynamoDB).
// The closer closes it.
func OpenStore(ctx context.Context, cfg config.Store, logger *slog.Logger) (core.Store, io.Closer, error) {
	switch cfg.Kind {
	case "sqlite":
		return openSQLite(ctx, cfg.Path, logger)
	case "dynamodb":
		awsCfg, err := LocalAWSConfig(ctx, cfg.Region, cfg.Endpoint, logger)
		if err != nil {
			return nil, nil, err
		}
		client := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
			if cfg.Endpoint != "" {
				o.BaseEndpoint = aws.String(cfg.Endpoint)
			}
		})
		return dynamo.New(client, cfg.Table, dynamo.Options{}), nopCloser{}, nil
	}
	return nil, nil, fmt.Errorf("config: store.kind: %q is neither sqlite nor dynamodb", cfg.Kind)
}

// LocalAWSConfig is the AWS configuration of local runs: the SDK's default
// chain, as the AWS CLI uses it, for credentials and for the region
// (AWS_REGION, AWS_DEFAULT_REGION, the profile); region, when not empty
// (the file's store.region), wins. DynamoDB Local keeps one database per
// access key unless it runs with -sharedDb, so credentials of our own
// choosing would hide the tables a user made with the CLI. With an
// endpoint (DynamoDB Local) and no credentials anywhere in the chain,
// fixed dummy ones are used, since DynamoDB Local accepts any, and with no
// region anywhere LocalRegion (DynamoDB Local ignores it but the SDK signs
// with one); the chain's EC2 metadata lookup is skipped then, which off EC2
// only costs time. Without an endpoint, no region is an error: a guess
// could act on a table of the same name in another region.
func LocalAWSConfig(ctx context.Context, region, endpoint string, logger *slog.Logger) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	if endpoint != "" {
		opts = append(opts, awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("aws config: %w", err)
	}
	if endpoint == "" {
		if awsCfg.Region == "" {
			return aws.Config{}, errors.New("config: store.region: no AWS region: set AWS_REGION, a region in your AWS profile, or store.region")
		}
		return awsCfg, nil
	}
	if awsCfg.Region == "" {
		awsCfg.Region = LocalRegion
	}
	if _, err := awsCfg.Credentials.Retrieve(ctx); err != nil {
		logger.Info("no AWS credentials found; using dummy ones for the DynamoDB endpoint",
			slog.String("endpoint", endpoint))
		awsCfg.Credentials = credentials.NewStaticCredentialsProvider(DummyAccessKeyID, "local", "")
	}
	return awsCfg, nil
}

// LocalRegion is the region LocalAWSConfig signs with for an endpoint
// such as DynamoDB Local when the chain names none.
const LocalRegion = "us-east-1"

// DummyAccessKeyID is the access key of the dummy credentials of
// LocalAWSConfig.
const DummyAccessKeyID = "local"

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// Serve serves h on addr until ctx is cancelled, then shuts down
// gracefully: requests in flight finish (and their commits with them)
// before Serve returns. ready, when not nil, receives the bound address.
func Serve(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := newServer(h)
	logger.Info("listening", slog.String("addr", ln.Addr().String()))
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	logger.Info("stopped")
	return err
}

// newServer is an HTTP server for h with the local server's timeouts and
// header limit (the callback and the metrics listener share them).
func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    32 << 10,
	}
}
