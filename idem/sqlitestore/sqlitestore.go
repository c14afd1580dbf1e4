// Package sqlitestore is the SQLite idem.Store, on modernc.org/sqlite
// (pure Go, no cgo): the claim of an operation key and the caller's own
// statements run in one BEGIN IMMEDIATE transaction, or none of them
// takes effect.
//
// The database runs in WAL mode with foreign keys on, synchronous=FULL
// and a bounded busy timeout; every write transaction starts with BEGIN
// IMMEDIATE, so the write lock is held before the claim is read, and this
// process's writers queue for it one at a time (Write).
//
// Records live in the table operations. Every claim of a key gets a
// generation number, recorded in the table claims, which is never
// purged: the caller's rows can reference the claim that wrote them
// (operation_key, generation) instead of the operations row, so that
// purging an expired record or reclaiming its key never touches them.
//
// The store owns the tables operations and claims and the index
// operations_expires_at, under those fixed names (Schema). Open creates
// them only when missing, so a table of the caller's with one of those
// names is kept as it is, and Open then fails on the store's statements
// (typically "no such column"). Use a database file in which these names
// are free; the caller's own tables may sit beside them.
package sqlitestore

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

	"github.com/aivax-examples/idempotent-callback/idem"
)

// Schema is the store's two tables, created by Open when missing.
const Schema = `
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
`

// DefaultBusyTimeout bounds how long a writer waits for the lock before
// the claim answers busy.
const DefaultBusyTimeout = 5 * time.Second

// Options configure Open.
type Options struct {
	// BusyTimeout: DefaultBusyTimeout when zero.
	BusyTimeout time.Duration
	// Now is the clock Open purges expired records by (time.Now when nil):
	// give it the clock the records are stamped with (idem.Guard.Now).
	// Claim reads no clock: it judges by the time it is handed.
	Now func() time.Time
}

// Claimed names the claim a Claim's writes run under: rows of the
// caller's can reference (Key, Generation) in the claims table.
type Claimed struct {
	Key        string // the operation key (claims.operation_key)
	Generation int64  // this claim's generation of Key (claims.generation), 1 for its first
}

// Writes are the caller's statements, run on tx once the key is known to
// be free and its record written. An error rolls everything back: a busy
// or locked database, a transaction that has ended (sql.ErrTxDone) or a
// context that has ended is answered busy, any other error is returned
// in an *idem.RefusedError, and nothing is claimed.
type Writes func(ctx context.Context, tx *sql.Tx, c Claimed) error

// Compile-time check.
var _ idem.Store[Writes] = (*Store)(nil)

// Store is the SQLite idem.Store.
type Store struct {
	db  *sql.DB
	opt Options
	// writeSlot queues this process's writers (a channel of capacity one
	// used as a lock), so that only one of them at a time competes for the
	// database's write lock with other processes. SQLite's busy handler
	// polls rather than queues; sixteen pollers in one process can starve
	// each other past the busy timeout, one cannot. Unlike a mutex, the
	// wait for the slot ends with the request's context (see Write).
	writeSlot chan struct{}
	// The statements of Claim, prepared once.
	selectClaim, claim, deleteOp, insertOp *sql.Stmt
}

// Open opens (creating if needed) the database file at path, creates the
// store's tables and purges records that expired before opt.Now. A
// relative path is taken from the working directory; the file's folder
// must exist. path is a file name, never a URI or ":memory:" (the store
// is durable). The caller's own tables go in the same database (DB).
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
	if _, err := db.ExecContext(ctx, Schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, MapError(err))
	}
	if _, err := s.Purge(ctx, opt.Now()); err != nil {
		_ = db.Close()
		return nil, err
	}
	for _, st := range []struct {
		stmt  **sql.Stmt
		query string
	}{
		// The key's next generation and its record, if any, in one read.
		{&s.selectClaim, `SELECT (SELECT COALESCE(MAX(generation), 0) + 1 FROM claims WHERE operation_key = ?1),
		  o.key, o.state, o.tenant_id, o.user_id, o.function, o.fingerprint, o.result, o.created_at, o.expires_at
		  FROM (SELECT 1) LEFT JOIN operations AS o ON o.key = ?1`},
		{&s.claim, `INSERT INTO claims (operation_key, generation, claimed_at) VALUES (?, ?, ?)`},
		{&s.deleteOp, `DELETE FROM operations WHERE key = ?`},
		{&s.insertOp, `INSERT INTO operations (key, generation, state, tenant_id, user_id, function, fingerprint, result, created_at, expires_at)
		  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
	} {
		if *st.stmt, err = db.PrepareContext(ctx, st.query); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("sqlite: prepare: %w", MapError(err))
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
		return "", fmt.Errorf("sqlite: %q is not a file path: name the database file, e.g. data.sqlite", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite: path %s: %w", path, err)
	}
	return abs, nil
}

// DB is the database, for the caller's own tables and reads.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error {
	for _, st := range []*sql.Stmt{s.selectClaim, s.claim, s.deleteOp, s.insertOp} {
		if st != nil {
			_ = st.Close()
		}
	}
	return s.db.Close()
}

// Claim implements idem.Store: one BEGIN IMMEDIATE transaction claims the
// key (absent, or present but expired: replaced, the caller's earlier
// rows stay), writes the record under a new generation and runs writes.
// When rec.AltKey is set, the same transaction first reads the record
// under it, which holds the call while it lives with rec's tenant and
// fingerprint: then nothing is written and that record is returned.
func (s *Store) Claim(ctx context.Context, rec idem.Record, writes Writes, now time.Time) (held *idem.Record, err error) {
	if err := rec.Check(now); err != nil {
		return nil, err
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer s.end()
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	gen, old, found, err := scanClaim(tx.StmtContext(ctx, s.selectClaim).QueryRowContext(ctx, rec.Key))
	if err != nil {
		return nil, MapError(err)
	}
	live := found && old.Live(now)
	if rec.AltKey != "" && rec.AltKey != rec.Key && (!live || old.Tenant != rec.Tenant || old.Fingerprint != rec.Fingerprint) {
		// The record of the call under the other policy, read under the
		// same write lock: it holds the call while it lives with the
		// call's tenant and arguments, ahead of a record of other
		// arguments under rec.Key.
		_, alt, altFound, err := scanClaim(tx.StmtContext(ctx, s.selectClaim).QueryRowContext(ctx, rec.AltKey))
		switch {
		case err != nil:
			return nil, MapError(err)
		case altFound && alt.Live(now) && alt.Tenant == rec.Tenant && alt.Fingerprint == rec.Fingerprint:
			return &alt, nil
		}
	}
	if live {
		return &old, nil
	}
	if err := s.write(ctx, tx, rec, gen, found); err != nil {
		return nil, err
	}
	if writes != nil {
		if err := writes(ctx, tx, Claimed{Key: rec.Key, Generation: gen}); err != nil {
			if mapped := MapError(err); errors.Is(mapped, idem.ErrBusy) {
				return nil, mapped
			}
			if ctx.Err() != nil {
				// The writes failed because the context ended: the
				// transaction is rolled back, the outcome busy.
				return nil, fmt.Errorf("%w: the context ended during the writes: %w", idem.ErrBusy, err)
			}
			return nil, &idem.RefusedError{Index: -1, Err: err}
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, MapError(err)
	}
	committed = true
	return nil, nil
}

// write records claim generation gen of rec.Key and writes rec under it,
// deleting the record it replaces when replace is set.
func (s *Store) write(ctx context.Context, tx *sql.Tx, rec idem.Record, gen int64, replace bool) error {
	if replace {
		if _, err := tx.StmtContext(ctx, s.deleteOp).ExecContext(ctx, rec.Key); err != nil {
			return MapError(err)
		}
	}
	created := rec.CreatedAt.UTC().Format(time.RFC3339Nano)
	if _, err := tx.StmtContext(ctx, s.claim).ExecContext(ctx, rec.Key, gen, created); err != nil {
		return MapError(err)
	}
	var result any
	if rec.Result != nil {
		result = string(rec.Result)
	}
	_, err := tx.StmtContext(ctx, s.insertOp).ExecContext(ctx, rec.Key, gen, string(rec.State), rec.Tenant,
		rec.Owner, rec.Function, rec.Fingerprint, result, created, rec.ExpiresAt.Unix())
	return MapError(err)
}

// Get reads the record of key: nil when there is none. An expired record
// is returned as stored; Record.Live tells.
func (s *Store) Get(ctx context.Context, key string) (*idem.Record, error) {
	_, rec, found, err := scanClaim(s.selectClaim.QueryRowContext(ctx, key))
	if err != nil || !found {
		return nil, MapError(err)
	}
	return &rec, nil
}

// Write runs fn in one BEGIN IMMEDIATE transaction under this process's
// write slot, for the caller's own writes outside a claim (the rows its
// claims wrote, updated later), and commits it when fn returns nil; an
// error from fn rolls it back and is returned as it is. The wait for the
// slot ends with ctx and, for a context without a deadline, after the
// busy timeout: either way the answer is busy and nothing is written.
func (s *Store) Write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.end()
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return MapError(tx.Commit())
}

// begin takes this process's write slot and begins a BEGIN IMMEDIATE
// transaction under it; end gives the slot back once the transaction has
// ended. When no transaction begins, the slot is given back here.
func (s *Store) begin(ctx context.Context) (*sql.Tx, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		s.end()
		return nil, MapError(err)
	}
	return tx, nil
}

func (s *Store) lock(ctx context.Context) error {
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
		return fmt.Errorf("%w: waiting for this process's write slot: %w", idem.ErrBusy, ctx.Err())
	}
}

// end gives back the write slot taken by begin.
func (s *Store) end() { <-s.writeSlot }

// Purge deletes records that expired before now and returns how many.
// Claims, and the caller's rows, stay.
func (s *Store) Purge(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM operations WHERE expires_at < ?`, now.Unix())
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge: %w", MapError(err))
	}
	return res.RowsAffected()
}

// scanClaim reads the row of the selectClaim statement: the key's next
// generation and, when found, its record.
func scanClaim(row *sql.Row) (gen int64, rec idem.Record, found bool, err error) {
	var key, state, tenant, owner, function, fingerprint, result, created sql.NullString
	var expires sql.NullInt64
	if err := row.Scan(&gen, &key, &state, &tenant, &owner, &function, &fingerprint, &result, &created, &expires); err != nil {
		return 0, idem.Record{}, false, err
	}
	if !key.Valid {
		return gen, idem.Record{}, false, nil
	}
	rec = idem.Record{Key: key.String, State: idem.State(state.String), Tenant: tenant.String, Owner: owner.String,
		Function: function.String, Fingerprint: fingerprint.String, ExpiresAt: time.Unix(expires.Int64, 0)}
	if result.Valid {
		rec.Result = []byte(result.String)
	}
	rec.CreatedAt, err = time.Parse(time.RFC3339Nano, created.String)
	return gen, rec, true, err
}

// MapError is the one place SQLite errors become the store's: a lock not
// obtained within the busy timeout, a cancelled or timed-out context, a
// transaction that has already ended (sql.ErrTxDone: database/sql rolls
// a transaction back when its context ends) → idem.ErrBusy (wrapped, the
// driver's error kept in the chain); anything else unchanged.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%w: %w", idem.ErrBusy, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w: %w", idem.ErrBusy, err)
	}
	return err
}
