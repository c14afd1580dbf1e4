//go:build lambda.norpc

package localserver

import (
	"errors"
	"io"
	"log/slog"

	"github.com/aivax-examples/idempotent-callback/internal/metrics"
)

func servePrometheus(string, *slog.Logger) (metrics.Recorder, io.Closer, error) {
	return nil, nil, errors.New("config: metrics_listen: this binary was built without Prometheus (-tags lambda.norpc); build without the tag")
}
