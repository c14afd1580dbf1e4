// Package sqlite is the embedded core.Store on modernc.org/sqlite (pure
// Go, no cgo), for running the product with nothing installed.
//
// The connection runs in WAL mode with foreign keys on, synchronous=FULL
// and a bounded busy timeout, and every write transaction starts with
// BEGIN IMMEDIATE so the write lock is held before the claim is read.
//
// Tickets outlive keys. A ticket does not reference the operations row
// itself (operation_key UNIQUE REFERENCES operations would block purging an
// expired operation and reclaiming its key). Instead every claim of a key
// gets a generation number, recorded in the small claims ledger that is
// never purged; a ticket references the claim (operation_key, generation)
// that created it, UNIQUE, so each claim has at most one ticket, and the
// operations row can be deleted or replaced while earlier tickets stay.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

const schema = `
CREATE TABLE IF NOT EXISTS operations (
	key         TEXT PRIMARY KEY,
	generation  INTEGER NOT NULL,
	state       TEXT NOT NULL CHECK (state IN ('pending', 'completed')),
	tenant_id   TEXT NOT NULL,
	user_id     TEXT NOT NULL,
	function    TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	result      TEXT,
	created_at  TEXT NOT NULL,
	expires_at  INTEGER NOT NULL,
	FOREIGN KEY (key, generation) REFERENCES claims (operation_key, generation)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS operations_expires_at ON operations (expires_at);
CREATE TABLE IF NOT EXISTS claims (
	operation_key TEXT NOT NULL,
	generation    INTEGER NOT NULL,
	claimed_at    TEXT NOT NULL,
	PRIMARY KEY (operation_key, generation)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tickets (
	ticket_id     TEXT PRIMARY KEY,
	operation_key TEXT NOT NULL,
	generation    INTEGER NOT NULL,
	tenant_id     TEXT NOT NULL,
	user_id       TEXT NOT NULL,
	arguments     TEXT NOT NULL,
	created_at    TEXT NOT NULL,
	UNIQUE (operation_key, generation),
	FOREIGN KEY (operation_key, generation) REFERENCES claims (operation_key, generation)
) WITHOUT ROWID;
`

// DefaultBusyTimeout bounds how long a writer waits for the lock before the
// callback answers busy.
const DefaultBusyTimeout = 5 * time.Second

// Options configure Open.
type Options struct {
	// BusyTimeout: DefaultBusyTimeout when zero.
	BusyTimeout time.Duration
	// Now is the clock Open purges expired operations by (time.Now when
	// nil): the same clock the service stamps operations with.
	Now func() time.Time
}

// Compile-time check: Store is the domain's store.
var _ core.Store = (*Store)(nil)

// Store is the SQLite adapter.
type Store struct {
	db  *sql.DB
	opt Options
	// writeSlot queues this process's writers (a channel of capacity one
	// used as a lock), so that only one of them at a time competes for the
	// database's write lock with other processes. SQLite's busy handler
	// polls rather than queues; sixteen pollers in one process can starve
	// each other past the busy timeout, one cannot. Unlike a mutex, the
	// wait for the slot ends with the request's context (see lockWrites).
	writeSlot chan struct{}
	// The statements of Create, prepared once: database/sql keeps each
	// prepared on every connection that has run it, so a callback does not
	// parse its SQL again.
	selectClaim, claim, deleteOp, insertOp, insertTicket *sql.Stmt
}

// Open opens (creating if needed) the database file at path, applies the
// schema and purges operations that expired before opt.Now. A relative
// path is taken from the working directory; the file's folder must exist.
// path is a file name, never a URI or ":memory:" (the store is durable).
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	if opt.BusyTimeout <= 0 {
		opt.BusyTimeout = DefaultBusyTimeout
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	abs, err := filePath(path)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opt.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	// The absolute path is a URI path: '?', '#' and '%' in it are escaped,
	// so that SQLite opens exactly the file named. (A relative one would
	// have no leading slash, and "file://name" is a URI authority SQLite
	// refuses.)
	dsn := url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}
	db, err := sql.Open("sqlite", dsn.String())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	s := &Store{db: db, opt: opt, writeSlot: make(chan struct{}, 1)}
	if _, err := db.ExecContext(ctx, schema+deliverySchema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, mapError(err))
	}
	if err := migrateDeliveries(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, mapError(err))
	}
	if _, err := s.Purge(ctx, opt.Now()); err != nil {
		_ = db.Close()
		return nil, err
	}
	for _, st := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		// The key's next generation and its operation, if any, in one read.
		{&s.selectClaim, `SELECT (SELECT COALESCE(MAX(generation), 0) + 1 FROM claims WHERE operation_key = ?1),
		  o.key, o.state, o.tenant_id, o.user_id, o.function, o.fingerprint, o.result, o.created_at, o.expires_at
		  FROM (SELECT 1) LEFT JOIN operations AS o ON o.key = ?1`},
		{&s.claim, `INSERT INTO claims (operation_key, generation, claimed_at) VALUES (?, ?, ?)`},
		{&s.deleteOp, `DELETE FROM operations WHERE key = ?`},
		{&s.insertOp, `INSERT INTO operations (key, generation, state, tenant_id, user_id, function, fingerprint, result, created_at, expires_at)
		  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.insertTicket, `INSERT INTO tickets (ticket_id, operation_key, generation, tenant_id, user_id, arguments, created_at)
		  VALUES (?, ?, ?, ?, ?, ?, ?)`},
	} {
		if *st.stmt, err = db.PrepareContext(ctx, st.query); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("sqlite: prepare: %w", mapError(err))
		}
	}
	return s, nil
}

// filePath is path made absolute, or an error for a name that is not a
// plain file path.
func filePath(path string) (string, error) {
	switch {
	case path == "":
		return "", errors.New("sqlite: empty database path")
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return "", fmt.Errorf("sqlite: %q is not a file path: name the database file, e.g. tickets.sqlite", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite: path %s: %w", path, err)
	}
	return abs, nil
}

// Close closes the database.
func (s *Store) Close() error {
	for _, st := range []*sql.Stmt{s.selectClaim, s.claim, s.deleteOp, s.insertOp, s.insertTicket} {
		if st != nil {
			_ = st.Close()
		}
	}
	return s.db.Close()
}

// DB exposes the database for tests and tools.
func (s *Store) DB() *sql.DB { return s.db }

// Create implements core.Store: one BEGIN IMMEDIATE transaction claims the
// key (absent, or present but expired) and writes the claim, the operation
// with its result and the ticket, or nothing.
func (s *Store) Create(ctx context.Context, op core.Operation, t core.Ticket, now time.Time) (existing *core.Operation, err error) {
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer s.unlockWrites()
	defer func() {
		if err != nil || existing != nil {
			_ = tx.Rollback()
		}
	}()
	gen, old, found, err := scanClaim(tx.StmtContext(ctx, s.selectClaim).QueryRowContext(ctx, op.Key))
	switch {
	case err != nil:
		return nil, mapError(err)
	case found && old.Live(now):
		return &old, nil
	}
	// Absent, or present but expired: replaced, its ticket stays.
	if err := s.writeOperation(ctx, tx, op, gen, found); err != nil {
		return nil, err
	}
	if _, err := tx.StmtContext(ctx, s.insertTicket).ExecContext(ctx, t.ID, t.OperationKey, gen, t.TenantID,
		t.UserID, t.Arguments, t.CreatedAt.UTC().Format(time.RFC3339Nano)); err != nil {
		return nil, mapError(err)
	}
	if err := insertDelivery(ctx, tx, t); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, mapError(err)
	}
	return nil, nil
}

// writeOperation records claim generation gen of op.Key and writes op
// under it, deleting the operation it replaces when replace is set.
func (s *Store) writeOperation(ctx context.Context, tx *sql.Tx, op core.Operation, gen int64, replace bool) error {
	if replace {
		if _, err := tx.StmtContext(ctx, s.deleteOp).ExecContext(ctx, op.Key); err != nil {
			return mapError(err)
		}
	}
	created := op.CreatedAt.UTC().Format(time.RFC3339Nano)
	if _, err := tx.StmtContext(ctx, s.claim).ExecContext(ctx, op.Key, gen, created); err != nil {
		return mapError(err)
	}
	_, err := tx.StmtContext(ctx, s.insertOp).ExecContext(ctx, op.Key, gen, string(op.State), op.TenantID,
		op.UserID, op.Function, op.Fingerprint, nullable(op.Result), created, op.ExpiresAt.Unix())
	return mapError(err)
}

// PutOperation writes an operation as is, under a claim of its own,
// whatever the key holds: for tests and operators that need a pending or
// an expired record.
func (s *Store) PutOperation(ctx context.Context, op core.Operation) (err error) {
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer s.unlockWrites()
	defer func() { _ = tx.Rollback() }()
	gen, _, found, err := scanClaim(tx.StmtContext(ctx, s.selectClaim).QueryRowContext(ctx, op.Key))
	if err != nil {
		return mapError(err)
	}
	if err := s.writeOperation(ctx, tx, op, gen, found); err != nil {
		return err
	}
	return mapError(tx.Commit())
}

// beginWrite takes the write slot (lockWrites) and begins a transaction
// under it; the caller gives the slot back with unlockWrites once the
// transaction has ended. When no transaction begins the slot is given
// back here.
func (s *Store) beginWrite(ctx context.Context) (*sql.Tx, error) {
	if err := s.lockWrites(ctx); err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		s.unlockWrites()
		return nil, mapError(err)
	}
	return tx, nil
}

// lockWrites takes this process's write slot. The wait ends with ctx (the
// request's deadline) and, for a context without a deadline, after the
// busy timeout, the bound SQLite itself puts on waiting for its lock:
// either way the answer is busy and nothing is written.
func (s *Store) lockWrites(ctx context.Context) error {
	select {
	case s.writeSlot <- struct{}{}:
		return nil
	default:
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opt.BusyTimeout)
		defer cancel()
	}
	select {
	case s.writeSlot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for this process's write slot: %w", core.ErrBusy, ctx.Err())
	}
}

func (s *Store) unlockWrites() { <-s.writeSlot }

func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// Purge deletes operations that expired before now and returns how many.
// Tickets and claims stay.
func (s *Store) Purge(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM operations WHERE expires_at < ?`, now.Unix())
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge: %w", mapError(err))
	}
	return res.RowsAffected()
}

// Ticket implements core.Store.
func (s *Store) Ticket(ctx context.Context, id string) (core.Ticket, error) {
	var t core.Ticket
	var created string
	err := s.db.QueryRowContext(ctx, `SELECT ticket_id, operation_key, tenant_id, user_id, arguments, created_at
		FROM tickets WHERE ticket_id = ?`, id).Scan(&t.ID, &t.OperationKey, &t.TenantID, &t.UserID, &t.Arguments, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Ticket{}, core.ErrNotFound
	}
	if err != nil {
		return core.Ticket{}, mapError(err)
	}
	if t.CreatedAt, err = time.Parse(time.RFC3339Nano, created); err != nil {
		return core.Ticket{}, err
	}
	t.Delivery, err = s.coreDelivery(ctx, id)
	return t, err
}

// CountTickets counts stored tickets.
func (s *Store) CountTickets(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM tickets`).Scan(&n)
	return n, mapError(err)
}

// scanClaim reads the row of the selectClaim statement: the key's next
// generation and, when found, its operation.
func scanClaim(row *sql.Row) (gen int64, op core.Operation, found bool, err error) {
	var key, state, tenant, user, function, fingerprint, result, created sql.NullString
	var expires sql.NullInt64
	if err := row.Scan(&gen, &key, &state, &tenant, &user, &function, &fingerprint, &result, &created, &expires); err != nil {
		return 0, core.Operation{}, false, err
	}
	if !key.Valid {
		return gen, core.Operation{}, false, nil
	}
	op = core.Operation{Key: key.String, State: core.OperationState(state.String), TenantID: tenant.String, UserID: user.String,
		Function: function.String, Fingerprint: fingerprint.String, ExpiresAt: time.Unix(expires.Int64, 0)}
	if result.Valid {
		op.Result = []byte(result.String)
	}
	op.CreatedAt, err = time.Parse(time.RFC3339Nano, created.String)
	return gen, op, true, err
}

// mapError is the one place SQLite errors become domain errors: a lock not
// obtained within the busy timeout, a cancelled or timed-out context → busy.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%w: %w", core.ErrBusy, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", core.ErrBusy, err)
	}
	return err
}
