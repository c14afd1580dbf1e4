package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/opkey"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
)

// These tests inject failures around the transaction on the real SQLite
// store and check that no partial record is ever left and that a failure
// after commit is recovered by the next call with the same key.

func sqliteHandler(t *testing.T, logger *slog.Logger) (*httpapi.Handler, *sqlite.Store) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "faults.sqlite"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &httpapi.Handler{
		Service: &core.Service{Store: s, Users: users, Policy: opkey.PolicyArguments, Retention: time.Hour, NewID: uuid.NewString},
		Auth:    nonce.Off{},
		Logger:  logger,
	}, s
}

const faultBody = `{"type":"tool_call","function":{"name":"create_ticket","content":{"title":"Fault"}},
 "context":{"externalUserId":"user-a","metadata":{"request_id":"r-fault"}}}`

func post(h http.Handler, w http.ResponseWriter) {
	r := httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(faultBody))
	h.ServeHTTP(w, r)
}

func ticketsIn(t *testing.T, s *sqlite.Store) int {
	t.Helper()
	n, err := s.CountTickets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func decodeRec(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return m
}

// brokenWriter loses the response: the connection died after the commit.
type brokenWriter struct{ header http.Header }

func (w *brokenWriter) Header() http.Header       { return w.header }
func (w *brokenWriter) WriteHeader(int)           {}
func (w *brokenWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestFailureAfterCommitIsRecoveredByTheSameKey(t *testing.T) {
	h, s := sqliteHandler(t, slog.New(slog.DiscardHandler))
	post(h, &brokenWriter{header: http.Header{}}) // committed, answer lost
	if n := ticketsIn(t, s); n != 1 {
		t.Fatalf("tickets after the lost answer = %d, want 1", n)
	}
	rec := httptest.NewRecorder()
	post(h, rec)
	body := decodeRec(t, rec)
	if rec.Code != 200 || body["deduplicated"] != true || body["ticket_id"] == nil {
		t.Fatalf("retry answered %d %v, want the stored ticket", rec.Code, body)
	}
	if n := ticketsIn(t, s); n != 1 {
		t.Fatalf("tickets after the retry = %d, want 1", n)
	}
}

// panicLogger fails while logging, after the response is written.
type panicLogger struct{ slog.Handler }

func (panicLogger) Enabled(context.Context, slog.Level) bool { return true }
func (panicLogger) Handle(context.Context, slog.Record) error {
	panic("log sink down")
}

func TestFailureWhileLoggingLosesNothing(t *testing.T) {
	h, s := sqliteHandler(t, slog.New(panicLogger{}))
	rec := httptest.NewRecorder()
	post(h, rec) // must not panic out of ServeHTTP
	first := decodeRec(t, rec)
	if rec.Code != 200 || first["status"] != "created" {
		t.Fatalf("first call: %d %v", rec.Code, first)
	}
	rec = httptest.NewRecorder()
	post(h, rec)
	second := decodeRec(t, rec)
	if second["deduplicated"] != true || second["ticket_id"] != first["ticket_id"] || ticketsIn(t, s) != 1 {
		t.Fatalf("second call: %v, tickets %d; want the first ticket, 1 ticket", second, ticketsIn(t, s))
	}
}

// failingStore fails before the transaction: nothing may be written.
type failingStore struct{ *sqlite.Store }

func (failingStore) Create(context.Context, core.Operation, core.Ticket, time.Time) (*core.Operation, error) {
	return nil, errors.New("disk on fire")
}

func TestFailureBeforeTheTransactionWritesNothing(t *testing.T) {
	h, s := sqliteHandler(t, slog.New(slog.DiscardHandler))
	real := h.Service.Store
	h.Service.Store = failingStore{s}
	rec := httptest.NewRecorder()
	post(h, rec)
	if rec.Code != 500 || strings.TrimSpace(rec.Body.String()) != `{"error":"internal"}` {
		t.Fatalf("answered %d %s, want 500 without detail", rec.Code, rec.Body.String())
	}
	if n := ticketsIn(t, s); n != 0 {
		t.Fatalf("tickets = %d, want 0", n)
	}
	h.Service.Store = real
	rec = httptest.NewRecorder()
	post(h, rec)
	if body := decodeRec(t, rec); body["status"] != "created" || body["deduplicated"] != false {
		t.Fatalf("after the failure: %v, want created", body)
	}
}
