package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
)

// RunLocal is the callback binary off Lambda, args its command line:
// -config FILE (the local configuration), then the local server; with
// -nonce, a fresh X-Request-Nonce for the configured hook_key; with
// "deliveries ...", the operator's command on the same store. It returns
// the exit status.
func RunLocal(args []string) int {
	fs := flag.NewFlagSet("callback", flag.ContinueOnError)
	path := fs.String("config", "config.json", "the local configuration file (docs/contract.md, Configuration: Local server)")
	printNonce := fs.Bool("nonce", false, "print a fresh X-Request-Nonce for the configured hook_key and exit")
	mcpTokenFor := fs.String("mcp-token", "", "print an MCP access token for this configured user, signed by the development issuer (mcp.dev_key), and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := config.LoadFile(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if fs.NArg() > 0 {
		if fs.Arg(0) != "deliveries" {
			fmt.Fprintf(os.Stderr, "unknown command %q; the one command is deliveries\n%s", fs.Arg(0), DeliveriesUsage)
			return 2
		}
		return Deliveries(context.Background(), cfg, fs.Args()[1:], os.Stdin, os.Stdout, os.Stderr)
	}
	if *printNonce {
		if cfg.HookKey == "" {
			fmt.Fprintln(os.Stderr, "config: hook_key: empty, so there is no nonce to make")
			return 1
		}
		n, err := nonce.Generate(cfg.HookKey, nonce.AIVAXCost)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(n)
		return 0
	}
	if *mcpTokenFor != "" {
		tok, err := devToken(cfg, *mcpTokenFor)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(tok)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h, closer, err := LocalServer(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = closer.Close() }()
	if err := Serve(ctx, cfg.Listen, h, logger, func(a net.Addr) {
		fmt.Fprintf(os.Stderr, "callback listening on http://%s/callback\n", a)
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// LocalServer builds the local server's graph on the configured store
// (SQLite or DynamoDB), outermost first: metrics.Collect and
// metrics.TimedStore (with metrics_listen: Prometheus serves /metrics
// there) → httpapi.Handler → core.Service → delivery.NotifyOnCommit (with
// a delivery block) → the store. With a delivery block, the service writes
// every new ticket pending, and a delivery worker runs on the same store
// until ctx ends: woken after each commit, polling for due tickets, and
// resuming at once whatever a previous process left pending or
// delivering; its steps and its counts of waiting tickets go to the same
// Prometheus. The returned closer stops, in order, the metrics listener,
// the worker (its deliveries in flight finish first) and the store.
func LocalServer(ctx context.Context, cfg config.Local, logger *slog.Logger) (http.Handler, io.Closer, error) {
	auth, err := authenticator(cfg.HookKey, cfg.InsecureNoAuth, cfg.Common, logger)
	if err != nil {
		return nil, nil, err
	}
	var dst delivery.Destination
	if cfg.Delivery != nil {
		if dst, err = newDestination(*cfg.Delivery); err != nil {
			return nil, nil, err
		}
	}
	store, storeCloser, err := OpenStore(ctx, cfg.Store, logger)
	if err != nil {
		return nil, nil, err
	}
	var cs closers
	var rec metrics.Recorder
	if cfg.MetricsListen != "" {
		// The metrics server closes first: after the callback server, so
		// the last requests are counted.
		var metricsSrv io.Closer
		if rec, metricsSrv, err = servePrometheus(cfg.MetricsListen, logger); err != nil {
			_ = storeCloser.Close()
			return nil, nil, err
		}
		cs = append(cs, metricsSrv)
	}
	serviceStore := store
	if dst != nil {
		ds, ok := store.(delivery.Outbox)
		if !ok {
			_ = append(cs, storeCloser).Close()
			return nil, nil, fmt.Errorf("config: delivery: store %s cannot deliver", cfg.Store.Kind)
		}
		w := localWorker(ds, dst, *cfg.Delivery, rec, cfg.Store.Kind, logger)
		serviceStore = delivery.NotifyOnCommit(store, w.Notify)
		cs = append(cs, runWorker(ctx, w, logger))
		// Kind and host only: the URL's path or query and the credentials
		// may hold secrets.
		logger.Info("delivering tickets", slog.String("kind", cfg.Delivery.Kind), slog.String("url", core.RedactRawURL(cfg.Delivery.URL)))
		cs = append(cs, checkAtStart(ctx, dst, logger))
	}
	cs = append(cs, storeCloser)
	if rec != nil {
		serviceStore = metrics.TimedStore{Store: serviceStore, Recorder: rec}
	}
	svc := &core.Service{
		Store:     serviceStore,
		Users:     localUsers(cfg.Users),
		Policy:    cfg.Policy,
		Retention: cfg.Retention,
		NewID:     uuid.NewString,
		Deliver:   dst != nil,
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
		_ = cs.Close()
		return nil, nil, err
	}
	if rec != nil {
		h = metrics.Collect(h)
	}
	return h, cs, nil
}

// localUsers are the file's users, in memory.
func localUsers(file map[string]config.User) memstore.Users {
	users := memstore.Users{}
	for id, u := range file {
		users[id] = core.User{ExternalID: id, TenantID: u.TenantID, UserID: u.UserID, Disabled: u.Disabled}
	}
	return users
}

// dynamoCountEvery spaces the local worker's counts of waiting tickets on
// DynamoDB, where each count is a Query: once a minute, as the deployed
// scheduled sweep counts. On SQLite a count is one read of an index, made
// after every sweep.
const dynamoCountEvery = time.Minute

// localWorker is the local server's delivery worker on store: zero
// max_attempts and timeout are the engine's and the clients' defaults.
// With rec (the local server's Prometheus), its steps and its counts of
// waiting tickets are reported there.
func localWorker(store delivery.Outbox, dst delivery.Destination, d config.Destination, rec metrics.Recorder, storeKind string, logger *slog.Logger) *delivery.Worker {
	var observer delivery.Observer
	var waiting func(context.Context, int)
	if rec != nil {
		observer = delivery.ObserverFunc(func(ctx context.Context, s delivery.Step) {
			rec.Delivery(ctx, metrics.DeliveryStep{State: string(s.Result), Lag: s.Lag})
		})
		waiting = func(ctx context.Context, n int) { rec.TicketsWaiting(ctx, n) }
	}
	var countEvery time.Duration
	if storeKind == "dynamodb" {
		countEvery = dynamoCountEvery
	}
	return &delivery.Worker{
		Log: logger,
		Engine: &delivery.Engine{Store: store, Destination: dst, MaxAttempts: d.MaxAttempts,
			Lease: delivery.LeaseFor(d.Timeout), CallTimeout: d.Timeout, Log: logger, Observer: observer},
		Waiting:    waiting,
		CountEvery: countEvery,
	}
}

// runWorker runs w until ctx ends or the returned closer is called, which
// waits for the deliveries in flight.
func runWorker(ctx context.Context, w *delivery.Worker, logger *slog.Logger) io.Closer {
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(wctx)
	}()
	return closerFunc(func() error {
		stop()
		<-done
		logger.Info("delivery worker stopped")
		return nil
	})
}

// checkAtStart runs delivery.Check on dst beside the server's start (it
// takes up to the client timeout) and logs its line: an error when the
// helpdesk refuses or fails the lookup, so a token that may create but
// not list tickets is seen at start, not when a ticket ends unknown. The
// closer waits for it.
func checkAtStart(ctx context.Context, dst delivery.Destination, logger *slog.Logger) io.Closer {
	done := make(chan struct{})
	go func() {
		defer close(done)
		line, ok := delivery.Check(ctx, dst)
		if ok {
			logger.Info("delivery check", slog.String("result", line))
			return
		}
		logger.Error("delivery check", slog.String("result", line))
	}()
	return closerFunc(func() error { <-done; return nil })
}
