package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
)

// BenchmarkStages splits BenchmarkHandlerOverhead/new_key into its steps,
// on the same callback: parse the body, canonicalize the arguments,
// validate them (from the canonical text), derive the key, write the
// response, write the log line. new_request is what the benchmark itself
// spends building the request with httptest, which is not the handler's.
func BenchmarkStages(b *testing.B) {
	body := []byte(callbacktest.Create("user-a", "bench-1", callbacktest.Arguments))
	call, err := ParseCall(body)
	if err != nil {
		b.Fatal(err)
	}
	fn, _ := core.LookupFunction(core.CreateTicket)
	canonical, err := idem.Canonical(call.Content)
	if err != nil {
		b.Fatal(err)
	}
	key, _ := idem.Key(idem.PolicyArguments, "tenant-a", call.RequestID, fn.Name, canonical)
	created := answer(core.Outcome{Kind: core.KindCreated,
		Body:     []byte(`{"status":"created","ticket_id":"0f8e4a52-5a3b-4a0b-9d7e-0b5f3c1e2d4a","deduplicated":false}`),
		Function: fn.Name, TenantID: "tenant-a", Key: key})
	h := &Handler{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	r := httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(string(body)))
	for _, st := range []struct {
		name string
		f    func()
	}{
		{"parse", func() { _, _ = ParseCall(body) }},
		{"canonicalize", func() { _, _ = idem.Canonical(call.Content) }},
		{"validate", func() { _, _ = fn.Validate([]byte(canonical)) }},
		{"key", func() { idem.Key(idem.PolicyArguments, "tenant-a", call.RequestID, fn.Name, canonical) }},
		{"respond", func() { write(discardWriter{}, created) }},
		{"log", func() { h.log(context.Background(), r, created, time.Millisecond) }},
		{"new_request", func() {
			_ = httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(string(body)))
			_ = httptest.NewRecorder()
		}},
	} {
		b.Run(st.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				st.f()
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps nothing, so respond
// measures only the encoding and the headers.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}
