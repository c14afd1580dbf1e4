//go:build !lambda.norpc

package localserver

import (
	"context"
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

// servePrometheus serves GET /metrics on addr until the returned closer
// shuts it down.
func servePrometheus(addr string, logger *slog.Logger) (metrics.Recorder, io.Closer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics_listen: %w", err)
	}
	rec := prom.New(httpapi.MetricLabels(), destination.MetricLabels())
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
