package sqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/deliverytest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/matrixtest"

	"github.com/aivax-examples/idempotent-callback/internal/store/sqlite"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/sqlitetest"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/storetest"
)

func open(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	return openAt(t, path, nil)
}

// openAt opens the store at path with now as its clock (time.Now when nil).
func openAt(t *testing.T, path string, now func() time.Time) *sqlite.Store {
	t.Helper()
	return sqlitetest.Store(t, path, sqlite.Options{Now: now})
}

// conformance opens a store on a fresh file, and reopens it, for the
// conformance suites.
var conformance = storetest.Harness{
	Open: func(t *testing.T, now func() time.Time) (storetest.Adapter, func(*testing.T) storetest.Adapter) {
		path := filepath.Join(t.TempDir(), "tickets.sqlite")
		s := openAt(t, path, now)
		return s, func(t *testing.T) storetest.Adapter {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openAt(t, path, now)
		}
	},
}

func TestConformance(t *testing.T) {
	storetest.Run(t, conformance)
}

const envPath = "SQLITE_TEST_PATH"

func TestMain(m *testing.M) {
	deliverytest.KillMain(func() (delivery.Outbox, error) {
		return sqlite.Open(context.Background(), os.Getenv(envPath), sqlite.Options{})
	})
	storetest.ChildMain(func() (core.Store, error) {
		return sqlite.Open(context.Background(), os.Getenv(envPath), sqlite.Options{})
	})
	os.Exit(m.Run())
}

// Two OS processes share one database file; 10 identical callbacks between
// them make exactly one ticket: 1 created, 9 deduplicated, no busy.
func TestTwoProcessesTenIdenticalCallbacks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.sqlite")
	s := open(t, path)
	counts := storetest.Processes(t, 2, 5, 5, "same", envPath+"="+path)
	byOutcome, ids := storetest.Summary(counts)
	if byOutcome["created"] != 1 || byOutcome["deduplicated"] != 9 || len(byOutcome) != 2 {
		t.Fatalf("outcomes = %v, want 1 created and 9 deduplicated only", byOutcome)
	}
	if len(ids["deduplicated"]) != 1 || !ids["created"][firstKey(ids["deduplicated"])] {
		t.Fatalf("ticket ids: %v", ids)
	}
	if n, _ := s.CountTickets(context.Background()); n != 1 {
		t.Fatalf("tickets = %d, want 1", n)
	}
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// A held write lock (another connection inside BEGIN IMMEDIATE) makes the
// callback answer busy, retryable, and write nothing; the wait is bounded
// by the configured busy timeout. The call runs under a deadline the test
// sets well past that timeout and well short of DefaultBusyTimeout: an
// answer that came back with that deadline not yet reached came from the
// configured bound, whatever the machine's speed.
func TestHeldWriteLockAnswersBusy(t *testing.T) {
	const configured, deadline = 200 * time.Millisecond, 3 * time.Second
	if deadline >= sqlite.DefaultBusyTimeout {
		t.Fatalf("the deadline must fall short of the default busy timeout")
	}
	path := filepath.Join(t.TempDir(), "locked.sqlite")
	holder := open(t, path)
	s := sqlitetest.Store(t, path, sqlite.Options{BusyTimeout: configured})

	ctx := context.Background()
	conn, err := holder.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	e := storetest.NewEnv(t, s, idem.PolicyArguments)
	callCtx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	o := e.Svc.Answer(callCtx, core.Call{Function: core.CreateTicket, Content: []byte(`{"title":"Locked"}`),
		ExternalUserID: "user-a", RequestID: "r-locked"})
	storetest.Want(t, o, core.KindBusy)
	if !errors.Is(o.Err, core.ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", o.Err)
	}
	if callCtx.Err() != nil {
		t.Fatalf("busy came after the test's %v deadline (%v), not from the %v busy timeout", deadline, o.Err, configured)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if n := e.Tickets(); n != 0 {
		t.Fatalf("tickets = %d after busy, want 0", n)
	}
	// Once the lock is gone, the same call creates the ticket.
	storetest.Want(t, e.Create("user-a", "r-locked", `{"title":"Locked"}`), core.KindCreated)
}

// rows counts the rows of each table that Create writes.
func rows(t *testing.T, s *sqlite.Store) (claims, operations, tickets int) {
	t.Helper()
	err := s.DB().QueryRow(`SELECT (SELECT COUNT(*) FROM claims), (SELECT COUNT(*) FROM operations),
		(SELECT COUNT(*) FROM tickets)`).Scan(&claims, &operations, &tickets)
	if err != nil {
		t.Fatal(err)
	}
	return claims, operations, tickets
}

// A failure inside the transaction, after the claim and the operation are
// written and before the ticket is (a trigger aborts the ticket's INSERT),
// leaves no claim, no operation and no ticket, counted in the file; the
// same call then creates.
func TestFailureInsideTheTransactionWritesNothing(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "fault.sqlite"))
	e := storetest.NewEnv(t, s, idem.PolicyArguments)
	storetest.Want(t, e.Create("user-a", "r-before", `{"title":"Before"}`), core.KindCreated)
	if _, err := s.DB().Exec(`CREATE TRIGGER fail_ticket BEFORE INSERT ON tickets
		BEGIN SELECT RAISE(ABORT, 'injected: disk full'); END`); err != nil {
		t.Fatal(err)
	}
	o := e.Create("user-a", "r-fault", `{"title":"Fault"}`)
	storetest.Want(t, o, core.KindInternal)
	if c, op, tk := rows(t, s); c != 1 || op != 1 || tk != 1 {
		t.Fatalf("after the failed transaction: %d claims, %d operations, %d tickets; want 1, 1, 1 (the first call's)", c, op, tk)
	}
	if _, err := s.DB().Exec(`DROP TRIGGER fail_ticket`); err != nil {
		t.Fatal(err)
	}
	storetest.Want(t, e.Create("user-a", "r-fault", `{"title":"Fault"}`), core.KindCreated)
	if c, op, tk := rows(t, s); c != 2 || op != 2 || tk != 2 {
		t.Fatalf("after the retry: %d claims, %d operations, %d tickets; want 2, 2, 2", c, op, tk)
	}
}

// Purge deletes expired operations but never tickets, and a purged key can
// be claimed again (the claim generation moves on).
func TestPurgeKeepsTicketsAndFreesKeys(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "purge.sqlite"))
	e := storetest.NewEnv(t, s, idem.PolicyArguments)
	first := e.Create("user-a", "r1", `{"title":"Old"}`)
	storetest.Want(t, first, core.KindCreated)
	n, err := s.Purge(context.Background(), e.Now.Add(48*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("purge = %d, %v; want 1", n, err)
	}
	e.Now = e.Now.Add(48 * time.Hour)
	second := e.Create("user-a", "r1", `{"title":"Old"}`)
	storetest.Want(t, second, core.KindCreated)
	if e.Tickets() != 2 {
		t.Fatalf("tickets = %d, want 2", e.Tickets())
	}
	var gens int
	if err := s.DB().QueryRow(`SELECT COUNT(DISTINCT generation) FROM tickets`).Scan(&gens); err != nil || gens != 2 {
		t.Fatalf("generations = %d, %v; want 2", gens, err)
	}
}

// 100 identical new callbacks from 4 OS processes on one file: exactly one
// ticket, 99 deduplicated with its ticket_id, no busy, no error.
func TestLoadHundredIdenticalFromFourProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "load.sqlite")
	s := open(t, path)
	got := storetest.CheckExactlyOnce(t, 4, 100, s, envPath+"="+path)
	t.Logf("outcomes: %v", got)
}

// 1,000 distinct callbacks at 16-way concurrency (4 processes × 4
// workers): 1,000 tickets, none lost, none doubled.
func TestLoadThousandDistinct(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	path := filepath.Join(t.TempDir(), "distinct.sqlite")
	s := open(t, path)
	got := storetest.CheckNoneLost(t, 4, 1000, 4, s, envPath+"="+path)
	t.Logf("outcomes: %v", got)
}

// A new process (cold start) returns the saved result for an old key.
func TestRestartInNewProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "restart.sqlite")
	open(t, path)
	storetest.CheckRestart(t, envPath+"="+path)
}

func TestSettleStale(t *testing.T) {
	storetest.CheckSettleStale(t, open(t, filepath.Join(t.TempDir(), "tickets.sqlite")))
}

func TestDeliveryConformance(t *testing.T) {
	deliverytest.Run(t, deliverytest.Harness{
		Open: func(t *testing.T) deliverytest.Adapter {
			return open(t, filepath.Join(t.TempDir(), "tickets.sqlite"))
		},
		Corrupt: func(t *testing.T, s deliverytest.Adapter, id string) {
			if err := s.(*sqlite.Store).ExecForTest(context.Background(),
				`UPDATE tickets SET created_at = 'yesterday' WHERE ticket_id = ?`, id); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// createOldTicket commits ticket "old" of operation "k1" at now, as a
// database made before a delivery migration holds it, and returns the
// operation for the caller to reuse under another key.
func createOldTicket(t *testing.T, s *sqlite.Store, now time.Time) idem.Record {
	t.Helper()
	op := idem.Record{Key: "k1", State: idem.StateCompleted, Tenant: "t", Owner: "u", Function: core.CreateTicket,
		Fingerprint: "f", Result: []byte(`{}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if _, err := s.Claims().Claim(context.Background(), op, core.Writes{Tickets: []core.Ticket{{ID: "old", TenantID: "t", UserID: "u", OperationKey: "k1",
		Arguments: `{"title":"old"}`, CreatedAt: now}}}, now); err != nil {
		t.Fatal(err)
	}
	return op
}

// A database file without the deliveries table opens unchanged: its
// tickets have no delivery state, tickets created afterwards get theirs.
func TestDeliveryMigrationOnExistingFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.sqlite")
	s := open(t, path)
	now := time.Now()
	op := createOldTicket(t, s, now)
	if _, err := s.DB().ExecContext(ctx, `DROP INDEX deliveries_due; DROP TABLE deliveries`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if tk, err := s.Ticket(ctx, "old"); err != nil || tk.Delivery != nil {
		t.Fatalf("old ticket: %+v, %v", tk.Delivery, err)
	}
	op.Key = "k2"
	if _, err := s.Claims().Claim(ctx, op, core.Writes{Tickets: []core.Ticket{{ID: "new", TenantID: "t", UserID: "u", OperationKey: "k2",
		Arguments: `{"title":"new"}`, CreatedAt: now,
		Delivery: &core.DeliveryStatus{State: core.DeliveryPending, DueAt: now.Truncate(time.Second)}}}}, now); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Delivery(ctx, "new"); err != nil || r.State != delivery.StatePending {
		t.Fatalf("new ticket: %+v, %v", r, err)
	}
	if ids, err := s.Due(ctx, now, 10); err != nil || len(ids) != 1 || ids[0] != "new" {
		t.Fatalf("Due = %v, %v", ids, err)
	}
}

// A deliveries table made without sent_at gains it at open: its rows read
// with no send start, and a send start is kept from then on.
func TestDeliverySentAtMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "before-sent-at.sqlite")
	s := open(t, path)
	now := time.Now()
	createOldTicket(t, s, now)
	// The table as it was made before sent_at existed (the schema's table
	// less that column), with a ticket that may be in the helpdesk.
	if _, err := s.DB().ExecContext(ctx, `ALTER TABLE deliveries DROP COLUMN sent_at;
		INSERT INTO deliveries (ticket_id, state, attempts, sent_unknown, due_at) VALUES ('old', 'pending', 1, 1, ?)`, now.Unix()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	r, err := s.Delivery(ctx, "old")
	if err != nil || r.State != delivery.StatePending || !r.SentUnknown || !r.SentAt.IsZero() || r.Attempts != 1 {
		t.Fatalf("old row: %+v, %v", r, err)
	}
	lease := delivery.CeilSecond(now.Add(delivery.DefaultLease))
	if _, err := s.Claim(ctx, "old", "w", now, lease); err != nil {
		t.Fatal(err)
	}
	sentAt := time.UnixMilli(now.UnixMilli() + 1)
	if err := s.Record(ctx, "old", "w", delivery.Update{State: delivery.StatePending, Attempts: 2, SentUnknown: true,
		SentAt: sentAt, DueAt: lease}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Delivery(ctx, "old"); err != nil || !r.SentAt.Equal(sentAt) {
		t.Fatalf("after the migration: %+v, %v; want sent at %v", r, err, sentAt)
	}
	// Opening again leaves the migrated table as it is.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := open(t, path).Delivery(ctx, "old"); err != nil || !r.SentAt.Equal(sentAt) {
		t.Fatalf("reopened: %+v, %v", r, err)
	}
}

// A worker process killed before, during and after its send: the next
// worker finishes the ticket, and the helpdesk holds it once.
func TestDeliveryWorkerKilled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "killed.sqlite")
	deliverytest.Kill(t, open(t, path), envPath+"="+path)
}

// The engine over a SQLite file against the fake helpdesk, under each
// failure mode: every ticket reaches the helpdesk at most once and ends as
// the mode says.
func TestDeliveryFailureMatrix(t *testing.T) {
	matrixtest.Run(t, deliverytest.Harness{
		Open: func(t *testing.T) deliverytest.Adapter {
			return open(t, filepath.Join(t.TempDir(), "tickets.sqlite"))
		},
	})
}

// The follow-ups over a SQLite file against each destination of the fake
// helpdesk: in order under concurrency and faults, exactly once.
func TestFollowUpDelivery(t *testing.T) {
	matrixtest.RunFollowUps(t, deliverytest.Harness{
		Open: func(t *testing.T) deliverytest.Adapter {
			return open(t, filepath.Join(t.TempDir(), "tickets.sqlite"))
		},
	})
}

// The follow-ups through the real service over the store: every answer,
// nothing written by a rejection, reads of one's own writes, comments
// racing closes.
func TestFollowUps(t *testing.T) {
	storetest.RunFollowUps(t, conformance)
}
