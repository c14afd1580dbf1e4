//go:build !notrace

package otelsetup

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestFlushTimeoutSetting: unset is the default; a duration is taken; a
// value that is not a positive duration is an error naming the variable.
func TestFlushTimeoutSetting(t *testing.T) {
	for v, want := range map[string]time.Duration{"": DefaultFlushTimeout, "150ms": 150 * time.Millisecond, "2s": 2 * time.Second} {
		got, err := flushTimeout(func(string) string { return v })
		if err != nil || got != want {
			t.Errorf("%q: %s %v, want %s", v, got, err, want)
		}
	}
	for _, v := range []string{"300", "0s", "-1s", "soon"} {
		_, err := flushTimeout(func(string) string { return v })
		if err == nil || !strings.Contains(err.Error(), FlushTimeoutEnv) {
			t.Errorf("%q: %v, want an error naming %s", v, err, FlushTimeoutEnv)
		}
		_, err = Setup(context.Background(), Options{Getenv: func(k string) string {
			return map[string]string{FlushTimeoutEnv: v}[k]
		}})
		if err == nil {
			t.Errorf("Setup with %s=%q started", FlushTimeoutEnv, v)
		}
	}
}

// TestFlushBudget: the timeout, cut to end FlushMargin before the
// invocation's deadline, never negative.
func TestFlushBudget(t *testing.T) {
	now := time.Now()
	deadline := func(left time.Duration) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(left))
		t.Cleanup(cancel)
		return ctx
	}
	for _, c := range []struct {
		ctx  context.Context
		want time.Duration
	}{
		{context.Background(), 300 * time.Millisecond},
		{deadline(10 * time.Second), 300 * time.Millisecond},
		{deadline(FlushMargin + 100*time.Millisecond), 100 * time.Millisecond},
		{deadline(FlushMargin / 2), 0},
	} {
		if got := flushBudget(c.ctx, 300*time.Millisecond, now); got != c.want {
			t.Errorf("budget %s, want %s", got, c.want)
		}
	}
}

// hangingExporter never answers before its context ends.
type hangingExporter struct{ calls int }

func (e *hangingExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	e.calls++
	<-ctx.Done()
	return ctx.Err()
}
func (e *hangingExporter) Shutdown(context.Context) error { return nil }

// TestInvocationProcessorDropsWhatMissesTheDeadline: spans whose export
// does not finish in time are dropped and counted, and the next flush
// sends only the spans ended since, never the dropped ones again; spans
// beyond the buffer are dropped and counted too.
func TestInvocationProcessorDropsWhatMissesTheDeadline(t *testing.T) {
	exp := &hangingExporter{}
	p := newInvocationProcessor(exp)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	tr := tp.Tracer("test")
	end := func(n int) {
		for range n {
			_, s := tr.Start(context.Background(), "s")
			s.End()
		}
	}
	flush := func() FlushResult {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		r := p.flush(ctx)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("flush took %s with a 20 ms deadline", took)
		}
		return r
	}
	end(3)
	if r := flush(); r.Dropped != 3 || r.Reason != "timeout" || r.Exported != 0 {
		t.Errorf("first flush %+v, want 3 dropped on timeout", r)
	}
	end(1)
	if r := flush(); r.Dropped != 1 {
		t.Errorf("second flush %+v, want only the span ended since dropped", r)
	}
	if r := flush(); r.Dropped != 0 || exp.calls != 2 {
		t.Errorf("an empty flush %+v after %d exports, want nothing exported", r, exp.calls)
	}
	end(maxBuffered + 5)
	if r := flush(); r.Dropped != maxBuffered+5 {
		t.Errorf("flush of a full buffer %+v, want %d dropped", r, maxBuffered+5)
	}
	if got := p.dropped.Load(); got != 3+1+maxBuffered+5 {
		t.Errorf("%d spans counted dropped", got)
	}
	// An unsampled span is not kept.
	_, s := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p), sdktrace.WithSampler(sdktrace.NeverSample())).
		Tracer("t").Start(context.Background(), "x", trace.WithSpanKind(trace.SpanKindInternal))
	s.End()
	if r := flush(); r.Dropped != 0 || exp.calls != 3 {
		t.Errorf("after an unsampled span: %+v", r)
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Errorf("empty ForceFlush: %v", err)
	}
}
