package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
)

func hardeningRecords(key, ticketID string) (idem.Record, core.Ticket, time.Time) {
	now := time.Now()
	return idem.Record{Key: key, State: idem.StateCompleted, Tenant: "t", Owner: "u", Function: core.CreateTicket,
			Fingerprint: "f", Result: []byte(`{"status":"created","ticket_id":"` + ticketID + `"}`), CreatedAt: now,
			ExpiresAt: now.Add(time.Hour)},
		core.Ticket{ID: ticketID, TenantID: "t", UserID: "u", OperationKey: key, Arguments: `{"title":"t"}`, CreatedAt: now}, now
}

// A writer queued behind another writer of the same process waits no
// longer than its request's deadline, and then answers busy having written
// nothing; so does one whose context has no deadline, after the busy
// timeout. The writer ahead is stuck on a write lock held by another
// connection, with a busy timeout of an hour.
func TestQueuedWriterHonoursItsDeadline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.sqlite")
	holder := open(t, path)
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{BusyTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	conn, err := holder.DB().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	// The writer ahead: holds the process's write slot, waits for the lock.
	aheadCtx, cancelAhead := context.WithCancel(context.Background())
	aheadDone := make(chan error, 1)
	go func() {
		op, tk, now := hardeningRecords("ahead", "ticket-ahead")
		_, err := s.Claims().Claim(aheadCtx, op, core.Writes{Tickets: []core.Ticket{tk}}, now)
		aheadDone <- err
	}()
	time.Sleep(100 * time.Millisecond) // let it take the slot (if it has not, the next call still must not hang)

	queued := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		op, tk, now := hardeningRecords("queued", "ticket-queued")
		_, err := s.Claims().Claim(ctx, op, core.Writes{Tickets: []core.Ticket{tk}}, now)
		queued <- err
	}()
	select {
	case err := <-queued:
		if !errors.Is(err, core.ErrBusy) {
			t.Errorf("queued writer: %v, want busy", err)
		}
	case <-time.After(30 * time.Second): // a liveness guard, not a speed goal
		cancelAhead()
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		t.Fatal("a queued writer ignored its deadline and was still waiting after 30 s")
	}

	cancelAhead()
	if err := <-aheadDone; !errors.Is(err, core.ErrBusy) {
		t.Errorf("writer ahead, cancelled: %v, want busy", err)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountTickets(context.Background()); err != nil || n != 0 {
		t.Fatalf("tickets = %d, %v; want 0", n, err)
	}
}

// A path with '?', '#' or '%' opens exactly that file: the DSN escapes it.
func TestPathIsEscapedInTheDSN(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tick?ets#1%41.sqlite")
	s := open(t, path)
	op, tk, now := hardeningRecords("k", "ticket-1")
	if _, err := s.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{tk}}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("database not at %s (%v); the directory holds %q", path, err, names)
	}
	// Reopened by the same path, the ticket is there.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := open(t, path)
	if got, err := again.Ticket(context.Background(), "ticket-1"); err != nil || got.OperationKey != "k" {
		t.Fatalf("Ticket after reopening: %+v, %v", got, err)
	}
}

// A relative path opens the file in the working directory. SQLite refuses
// "file://name?…" (a URI authority), which is what a relative path became
// when it was written into the DSN as it was.
func TestRelativePathOpens(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("data", 0o750); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"tickets.sqlite", "./dot.sqlite", "data/nested.sqlite"} {
		s := open(t, p)
		op, tk, now := hardeningRecords("k-"+p, "ticket-"+p)
		if _, err := s.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{tk}}, now); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Fatalf("%s: database not in the working directory: %v", p, err)
		}
	}
}

// What is not a file path is refused by Open, with the value in the error.
func TestNonFilePathsAreRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, p := range []string{"", ":memory:", "file:x.sqlite"} {
		s, err := sqlite.Open(context.Background(), p, sqlite.Options{})
		if err == nil {
			_ = s.Close()
			t.Fatalf("Open(%q) succeeded, want an error", p)
		}
		if p != "" && !strings.Contains(err.Error(), p) {
			t.Errorf("Open(%q): error %q does not name the path", p, err)
		}
	}
	if entries, _ := os.ReadDir("."); len(entries) != 0 {
		t.Fatalf("refused paths left %d files behind", len(entries))
	}
}
