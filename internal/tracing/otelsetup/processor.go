//go:build !notrace

package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// maxBuffered bounds the spans an invocation keeps for its flush
// (OpenTelemetry's default batch queue size); the ones beyond are dropped
// and counted.
const maxBuffered = 2048

// invocationProcessor is the span processor of a Lambda function: it
// keeps the spans ended during an invocation in memory and exports them
// in one request when the invocation flushes, on the caller's goroutine
// and within the caller's deadline. It starts no goroutine, so nothing of
// it runs while Lambda freezes the sandbox between invocations; a batch
// that is not exported in time is dropped and counted, never kept for the
// next invocation.
type invocationProcessor struct {
	exp sdktrace.SpanExporter

	mu      sync.Mutex
	spans   []sdktrace.ReadOnlySpan
	over    int // spans ended while the buffer was full, since the last flush
	dropped atomic.Int64
}

func newInvocationProcessor(exp sdktrace.SpanExporter) *invocationProcessor {
	return &invocationProcessor{exp: exp}
}

func (p *invocationProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *invocationProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.spans) >= maxBuffered {
		p.over++
		return
	}
	p.spans = append(p.spans, s)
}

// flush exports the buffered spans in one request bounded by ctx; on
// failure they are dropped and counted.
func (p *invocationProcessor) flush(ctx context.Context) FlushResult {
	p.mu.Lock()
	spans, over := p.spans, p.over
	p.spans, p.over = nil, 0
	p.mu.Unlock()
	var r FlushResult
	if over > 0 {
		r.Dropped, r.Reason = over, "buffer_full"
	}
	if len(spans) > 0 {
		if err := p.exp.ExportSpans(ctx, spans); err != nil {
			r.Dropped += len(spans)
			r.Reason, r.Err = exportFailure(ctx, err), err
		} else {
			r.Exported = len(spans)
		}
	}
	p.dropped.Add(int64(r.Dropped))
	return r
}

// exportFailure classifies an export error for the drop line, without its
// text.
func exportFailure(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED), strings.Contains(err.Error(), "connection refused"):
		return "refused"
	}
	return "rejected"
}

func (p *invocationProcessor) ForceFlush(ctx context.Context) error {
	if r := p.flush(ctx); r.Dropped > 0 {
		return fmt.Errorf("tracing: %d spans dropped (%s)", r.Dropped, r.Reason)
	}
	return nil
}

func (p *invocationProcessor) Shutdown(ctx context.Context) error {
	err := p.ForceFlush(ctx)
	return errors.Join(err, p.exp.Shutdown(ctx))
}
