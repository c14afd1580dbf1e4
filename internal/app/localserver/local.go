// Package localserver is the local server's composition root (cmd/server,
// what make run starts): the callback's doors on the configured store,
// and with a delivery block the delivery worker beside them.
package localserver

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/app/doors"
	"github.com/aivax-examples/idempotent-callback/internal/app/localstore"
	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/dynamo"
	"github.com/aivax-examples/idempotent-callback/internal/store/memstore"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
	"github.com/aivax-examples/idempotent-callback/internal/tracing/otelsetup"
	"github.com/aivax-examples/idempotent-callback/internal/urls"
)

// Mode is what the local server's command line asks of Main besides
// serving: print a nonce, print an MCP token, or (Args) a command it does
// not have.
type Mode struct {
	Nonce       bool     // -nonce: a fresh X-Request-Nonce for the configured hook_key
	MCPTokenFor string   // -mcp-token USER: an MCP access token for USER
	Args        []string // what follows the flags; the server takes none
}

// Main is cmd/server after its configuration is read: with -nonce or
// -mcp-token it prints one line and returns; otherwise it builds the
// local server (LocalServer) and serves it on cfg.Listen until SIGINT or
// SIGTERM. It returns the exit status.
func Main(cfg config.Local, m Mode) int {
	if len(m.Args) > 0 {
		fmt.Fprintf(os.Stderr, "unknown command %q; the server takes no command (the operator's is go run ./cmd/deliveries -config FILE COMMAND)\n", m.Args[0])
		return 2
	}
	s, err := CheckSettings(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg = s.File
	if m.Nonce {
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
	if m.MCPTokenFor != "" {
		tok, err := devToken(cfg, m.MCPTokenFor)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(tok)
		return 0
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Spans go over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set;
	// without it nothing is recorded and no collector is needed.
	tp, err := otelsetup.Setup(ctx, otelsetup.Options{Getenv: os.Getenv, Service: "idempotent-callback-local"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		// The spans still queued get a short while to leave; a collector
		// that does not answer does not hold the exit.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTracing)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}()
	h, closer, err := LocalServer(ctx, s, logger, tp)
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

// shutdownTracing bounds the export of the spans still queued at exit.
const shutdownTracing = 2 * time.Second

// LocalServer builds the local server's graph on the configured store
// (SQLite or DynamoDB), outermost first: httpapi.Collect and
// core.TimedStore (with metrics_listen: Prometheus serves /metrics
// there) → httpapi.Handler → core.Service → delivery.NotifyOnCommit (with
// a delivery block) → the store. With a delivery block, the service writes
// every new ticket pending, and a delivery worker runs on the same store
// until ctx ends: woken after each commit, polling for due tickets, and
// resuming at once whatever a previous process left pending or
// delivering; its steps and its counts of waiting tickets go to the same
// Prometheus. The returned closer stops, in order, the metrics listener,
// the worker (its deliveries in flight finish first) and the store.
//
// s is the file checked (CheckSettings). tp records the door's and the
// DynamoDB requests' spans; nil records none.
func LocalServer(ctx context.Context, s Settings, logger *slog.Logger, tp *otelsetup.Provider) (http.Handler, io.Closer, error) {
	cfg := s.File
	auth, err := doors.Authenticator(s.Doors, cfg.InsecureNoAuth, logger)
	if err != nil {
		return nil, nil, err
	}
	var dst delivery.Destination
	if cfg.Delivery != nil {
		if dst, err = destination.New(*cfg.Delivery); err != nil {
			return nil, nil, err
		}
	}
	// rec is set below, before any request is served: a failed read-ahead
	// (DynamoDB) is counted in Prometheus when it serves, and logged
	// once per process in any case.
	var rec metrics.Recorder
	store, storeCloser, err := localstore.Open(ctx, s.Store, logger,
		metrics.ReadAheadReporter(func() metrics.Recorder { return rec }, logger, dynamo.ReadAheadClass), tp)
	if err != nil {
		return nil, nil, err
	}
	var cs closers
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
			return nil, nil, fmt.Errorf("config: delivery: store %s cannot deliver", s.Store.Kind())
		}
		w := localWorker(ds, dst, *cfg.Delivery, rec, s.Store.Kind(), logger)
		serviceStore = delivery.NotifyOnCommit(store, w.Notify)
		cs = append(cs, runWorker(ctx, w, logger))
		// Kind and host only: the URL's path or query and the credentials
		// may hold secrets.
		logger.Info("delivering tickets", slog.String("kind", cfg.Delivery.Kind), slog.String("url", urls.RedactedRaw(cfg.Delivery.URL)))
		cs = append(cs, checkAtStart(ctx, dst, logger))
	}
	cs = append(cs, storeCloser)
	if rec != nil {
		serviceStore = core.TimedStore{Store: serviceStore, Observe: rec.StoreCall}
	}
	h, err := doors.Build(doors.Config{
		Store:    serviceStore,
		Users:    localUsers(cfg.Users),
		Settings: s.Doors,
		MCP:      cfg.MCP,
		MCPNames: config.MCPFileNames,
		Auth:     auth,
		Deliver:  dst != nil,
		Metrics:  rec,
		Logger:   logger,
	})
	if err != nil {
		_ = cs.Close()
		return nil, nil, err
	}
	if rec != nil {
		h = httpapi.Collect(h)
	}
	return tracing.Door(h, tp.TracerProvider()), cs, nil
}

// Settings are the local file checked by CheckSettings: what Main serves
// and LocalServer builds, checking none of it again.
type Settings struct {
	// File is the file as read, mcp.dev_key's path resolved; its store
	// block and its shared settings are carried checked in Store and
	// Doors.
	File  config.Local
	Store localstore.Settings
	Doors doors.Settings
}

// CheckSettings checks the file's settings that belong to the packages
// applying them (localstore.CheckSettings: the store block;
// localstore.FilePath: mcp.dev_key's path; doors.CheckSettings: the key
// policy, the hook key, the nonce costs; core: the users' ids; urls.Loopback:
// the unauthenticated listeners), with their defaults set. The local
// server calls it once, right after reading the file.
func CheckSettings(cfg config.Local) (Settings, error) {
	st, err := localstore.CheckSettings(cfg.Store, cfg.Dir)
	if err != nil {
		return Settings{}, err
	}
	if cfg.MCP.DevKey != "" {
		if cfg.MCP.DevKey, err = localstore.FilePath(config.MCPFileNames.DevKey, cfg.MCP.DevKey, cfg.Dir); err != nil {
			return Settings{}, err
		}
	}
	ds, err := doors.CheckSettings(cfg.Common, cfg.HookKey, config.SettingFileNames)
	if err != nil {
		return Settings{}, err
	}
	if err := core.CheckUserIDs(cfg.Users); err != nil {
		return Settings{}, fmt.Errorf("config: users: %w", err)
	}
	if err := checkListeners(cfg); err != nil {
		return Settings{}, err
	}
	return Settings{File: cfg, Store: st, Doors: ds}, nil
}

// checkListeners keeps what is not authenticated on this machine:
// insecure_no_auth only with a loopback listen, and metrics_listen (the
// Prometheus /metrics, which has no authentication) only on a loopback
// address, so 0.0.0.0, [::] or a public address is refused.
func checkListeners(cfg config.Local) error {
	if cfg.InsecureNoAuth {
		listen := cmp.Or(cfg.Listen, config.DefaultListen)
		if host, _, err := net.SplitHostPort(listen); err != nil || !urls.Loopback(host) {
			return fmt.Errorf("config: insecure_no_auth: only allowed when listen is a loopback address, not %q", listen)
		}
	}
	if cfg.MetricsListen != "" {
		host, port, err := net.SplitHostPort(cfg.MetricsListen)
		if err != nil || !urls.Loopback(host) {
			return fmt.Errorf("config: metrics_listen: %q is not a loopback address: /metrics has no authentication; use 127.0.0.1:%s, [::1]:%s or localhost:%s",
				cfg.MetricsListen, port, port, port)
		}
	}
	return nil
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
			rec.Delivery(ctx, metrics.DeliveryStep{State: string(s.Result), Kind: s.Kind, Lag: s.Lag})
		})
		waiting = func(ctx context.Context, n int) { rec.TicketsWaiting(ctx, n) }
	}
	var countEvery time.Duration
	if storeKind == localstore.KindDynamoDB {
		countEvery = dynamoCountEvery
	}
	engine := destination.Engine(d)
	engine.Store, engine.Destination, engine.Log, engine.Observer = store, dst, logger, observer
	return &delivery.Worker{
		Log:        logger,
		Engine:     &engine,
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
