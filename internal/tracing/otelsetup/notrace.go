//go:build notrace

package otelsetup

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/otel/trace"
)

// Provider is what Setup installed: built with -tags notrace, the
// OpenTelemetry SDK and its exporter are not linked, and nothing ever
// exports. The build exists to measure what linking them costs (make
// bench); the deployed functions are built without the tag.
type Provider struct{}

// Exporting reports false: nothing exports in this build.
func (p *Provider) Exporting() bool { return false }

// Flush does nothing.
func (p *Provider) Flush(context.Context) error { return nil }

// TracerProvider is nil: nothing exports.
func (p *Provider) TracerProvider() trace.TracerProvider { return nil }

// Shutdown does nothing.
func (p *Provider) Shutdown(context.Context) error { return nil }

// DroppedSpans is zero.
func (p *Provider) DroppedSpans() int64 { return 0 }

// AWS leaves cfg as it is.
func (p *Provider) AWS(*aws.Config, func(context.Context) bool) {}

func (p *Provider) flushInvocation(context.Context) {}

// setupExporter refuses an OTLP endpoint, which this build cannot honour.
func setupExporter(context.Context, Options, func(string) string, time.Duration) (*Provider, error) {
	return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_ENDPOINT is set, but this build has no exporter (-tags notrace)")
}
