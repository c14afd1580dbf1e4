package httpapi_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/httpapi"
	"github.com/aivax-examples/idempotent-callback/internal/nonce"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/callbacktest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/sqlitetest"
)

// These tests inject failures around the transaction on the real SQLite
// store and check that no partial record is ever left and that a failure
// after commit is recovered by the next call with the same key.

func sqliteHandler(t *testing.T, logger *slog.Logger) (*httpapi.Handler, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "faults.sqlite")
	return newHandler(sqlitetest.Store(t, path, sqlite.Options{}), nonce.Off{}, time.Hour, logger), sqlitetest.Open(t, path)
}

var faultBody = callbacktest.Create("user-a", "r-fault", callbacktest.Title("Fault"))

func post(h http.Handler, w http.ResponseWriter) {
	r := httptest.NewRequest(http.MethodPost, "/callback", strings.NewReader(faultBody))
	h.ServeHTTP(w, r)
}

func ticketsIn(t *testing.T, db *sql.DB) int {
	t.Helper()
	n, err := sqlitetest.CountTickets(context.Background(), db)
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

// A failure inside the real transaction (a trigger aborts the ticket's
// INSERT after the claim and the operation are written) answers 500
// without detail and leaves no row in any table; the same call then
// creates.
func TestFailureInsideTheTransactionWritesNothing(t *testing.T) {
	h, s := sqliteHandler(t, slog.New(slog.DiscardHandler))
	if _, err := s.Exec(`CREATE TRIGGER fail_ticket BEFORE INSERT ON tickets
		BEGIN SELECT RAISE(ABORT, 'injected: disk full'); END`); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	post(h, rec)
	if rec.Code != 500 || rec.Body.String() != `{"error":"internal"}`+"\n" {
		t.Fatalf("answered %d %s, want 500 without detail", rec.Code, rec.Body.String())
	}
	var rows int
	if err := s.QueryRow(`SELECT (SELECT COUNT(*) FROM claims) + (SELECT COUNT(*) FROM operations) +
		(SELECT COUNT(*) FROM tickets)`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("rows after the failed transaction = %d (%v), want 0", rows, err)
	}
	if _, err := s.Exec(`DROP TRIGGER fail_ticket`); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	post(h, rec)
	if body := decodeRec(t, rec); rec.Code != 200 || body["status"] != "created" || body["deduplicated"] != false {
		t.Fatalf("after the failure: %d %v, want created", rec.Code, body)
	}
	if n := ticketsIn(t, s); n != 1 {
		t.Fatalf("tickets = %d, want 1", n)
	}
}
