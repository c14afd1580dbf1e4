package localserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/app/destination"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/metrics/prom"
)

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

// servePrometheus serves GET /metrics on addr until the returned closer
// shuts it down.
func servePrometheus(addr string, logger *slog.Logger) (metrics.Recorder, io.Closer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics_listen: %w", err)
	}
	rec := prom.New(httpapi.MetricLabels(nil), destination.MetricLabels())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", rec.Handler())
	srv := newServer(mux)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	logger.Info("metrics listening", slog.String("url", "http://"+ln.Addr().String()+"/metrics"))
	return rec, closerFunc(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		<-done
		return err
	}), nil
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
