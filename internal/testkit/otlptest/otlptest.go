// Package otlptest is an OpenTelemetry trace receiver for tests: an
// OTLP/HTTP endpoint on loopback that decodes each export with the
// official OTLP protobuf types (not a mock of the SDK) and keeps the raw
// bytes, so a test can assert the spans a program exported and search
// everything it sent for a value that must not be there.
package otlptest

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is an OTLP/HTTP (protobuf) trace receiver.
type Receiver struct {
	// URL is the endpoint to set as OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	mu    sync.Mutex
	raw   bytes.Buffer
	spans []*tracepb.Span
}

// Start starts a receiver on loopback, closed when the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	rc := &Receiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	rc.URL = srv.URL
	return rc
}

// ServeHTTP answers POST /v1/traces: a body that is not an
// ExportTraceServiceRequest is refused with 400 and kept nowhere.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "not a trace export", http.StatusNotFound)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.raw.Write(body)
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			rc.spans = append(rc.spans, ss.GetSpans()...)
		}
	}
	rc.mu.Unlock()
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// Snapshot returns the spans received so far and the raw bytes of every
// export.
func (rc *Receiver) Snapshot() ([]*tracepb.Span, []byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*tracepb.Span(nil), rc.spans...), bytes.Clone(rc.raw.Bytes())
}

// Attr is the value of span s's attribute key as text (a string as it
// is, an int or bool in decimal or true/false); ok is false when s has
// no such attribute.
func Attr(s *tracepb.Span, key string) (string, bool) {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			v := kv.GetValue()
			switch {
			case v.GetStringValue() != "":
				return v.GetStringValue(), true
			default:
				return strings.TrimPrefix(strings.TrimPrefix(v.String(), "int_value:"), "bool_value:"), true
			}
		}
	}
	return "", false
}

// ID is a span's id in hex.
func ID(s *tracepb.Span) string { return hex.EncodeToString(s.GetSpanId()) }

// Tree prints spans as a tree: each span under its parent, with the
// attributes of keys present and its links.
func Tree(spans []*tracepb.Span, keys ...string) string {
	children := map[string][]*tracepb.Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[ID(s)] = true
	}
	var roots []*tracepb.Span
	for _, s := range spans {
		p := hex.EncodeToString(s.GetParentSpanId())
		if !ids[p] {
			roots = append(roots, s)
			continue
		}
		children[p] = append(children[p], s)
	}
	var b strings.Builder
	var walk func(s *tracepb.Span, depth int)
	walk = func(s *tracepb.Span, depth int) {
		b.WriteString(strings.Repeat("  ", depth) + s.GetName() + " [" + ID(s) + "]")
		for _, k := range keys {
			if v, ok := Attr(s, k); ok {
				b.WriteString(" " + k + "=" + v)
			}
		}
		for _, l := range s.GetLinks() {
			b.WriteString(" link→" + hex.EncodeToString(l.GetSpanId()))
		}
		b.WriteString("\n")
		for _, c := range children[ID(s)] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// Outside returns the spans that did not run wholly between from and to:
// started before from or ended after to.
func Outside(spans []*tracepb.Span, from, to time.Time) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range spans {
		start, end := time.Unix(0, int64(s.GetStartTimeUnixNano())), time.Unix(0, int64(s.GetEndTimeUnixNano())) //nolint:gosec // OTLP times are nanoseconds since the epoch, far inside int64
		if start.Before(from) || end.After(to) {
			out = append(out, s)
		}
	}
	return out
}
