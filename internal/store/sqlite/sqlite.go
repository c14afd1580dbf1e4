// Package sqlite is the embedded core.Store on modernc.org/sqlite (pure
// Go, no cgo), for running the product with nothing installed.
//
// The connection runs in WAL mode with foreign keys on, synchronous=FULL
// and a bounded busy timeout, and every write transaction starts with
// BEGIN IMMEDIATE so the write lock is held before the claim is read.
//
// The operations and the claims ledger are package idem's SQLite store
// (idem/sqlitestore), which opens the database and makes every claim;
// this package adds the tickets, the tools' other items
// (core.Writes.Items) and the deliveries of both, written by the claim's
// transaction as the caller's statements.
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
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/sqlitestore"
	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// schema is the product's own table; the operations and claims tables it
// references are sqlitestore.Schema. attrs (JSON, NULL until a tool sets
// one) holds the attributes of the ticket's item beyond these columns
// (core.Ticket.Attrs); a table made before it existed gains it at open
// (addedColumns).
const schema = `
CREATE TABLE IF NOT EXISTS tickets (
	ticket_id     TEXT PRIMARY KEY,
	operation_key TEXT NOT NULL,
	generation    INTEGER NOT NULL,
	tenant_id     TEXT NOT NULL,
	user_id       TEXT NOT NULL,
	arguments     TEXT NOT NULL,
	created_at    TEXT NOT NULL,
	attrs         TEXT,
	UNIQUE (operation_key, generation),
	FOREIGN KEY (operation_key, generation) REFERENCES claims (operation_key, generation)
) WITHOUT ROWID;
`

// DefaultBusyTimeout bounds how long a writer waits for the lock before the
// callback answers busy.
const DefaultBusyTimeout = sqlitestore.DefaultBusyTimeout

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
	db *sql.DB
	// claims owns the database, the operations and the claims ledger, and
	// this process's write slot; every write transaction begins there.
	claims *sqlitestore.Store
	// insertTicket is prepared once: database/sql keeps it prepared on
	// every connection that has run it.
	insertTicket *sql.Stmt
}

// Open opens (creating if needed) the database file at path, applies the
// schema and purges operations that expired before opt.Now. A relative
// path is taken from the working directory; the file's folder must exist.
// path is a file name, never a URI or ":memory:" (the store is durable).
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	claims, err := sqlitestore.Open(ctx, path, sqlitestore.Options{BusyTimeout: opt.BusyTimeout, Now: opt.Now})
	if err != nil {
		return nil, err
	}
	s := &Store{db: claims.DB(), claims: claims}
	if _, err := s.db.ExecContext(ctx, schema+itemsSchema+deliverySchema+effectSchema); err != nil {
		_ = claims.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, mapError(err))
	}
	if err := addColumns(ctx, s.db); err != nil {
		_ = claims.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, mapError(err))
	}
	s.insertTicket, err = s.db.PrepareContext(ctx, `INSERT INTO tickets (ticket_id, operation_key, generation, tenant_id, user_id, arguments, created_at)
		  VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		_ = claims.Close()
		return nil, fmt.Errorf("sqlite: prepare: %w", mapError(err))
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	_ = s.insertTicket.Close()
	return s.claims.Close()
}

// Claims implements core.Store: the claims of package idem's SQLite
// store, with the product's writes as the claim's own statements.
func (s *Store) Claims() idem.Store[core.Writes] { return claims{s} }

// claims is the Store's idem.Store: the one place its claims are made and
// answered.
type claims struct{ s *Store }

// Claim implements idem.Store: one BEGIN IMMEDIATE transaction, package
// idem's claim, claims the key (absent, or present but expired) and
// writes the record with its result and, as the claim's own statements,
// each ticket and its delivery record (under the claim's key and
// generation, which the tickets table references), then the item writes
// and their effects' delivery records (writeItems); or nothing. The
// answer is sqlitestore's as it is: a ticket id that exists, or an item
// write whose condition fails, refuses the claim (idem.Refused; for an
// item write the error wraps a *core.ConditionError, which
// core.Writes.Refused reads).
func (c claims) Claim(ctx context.Context, rec idem.Record, w core.Writes, now time.Time) (*idem.Record, error) {
	s := c.s
	return s.claims.Claim(ctx, rec, func(ctx context.Context, tx *sql.Tx, c sqlitestore.Claimed) error {
		// Writes the store cannot execute are refused before any
		// statement runs.
		if err := core.CheckItemWrites(w.Items); err != nil {
			return err
		}
		for _, t := range w.Tickets {
			if _, err := tx.StmtContext(ctx, s.insertTicket).ExecContext(ctx, t.ID, c.Key, c.Generation, t.TenantID,
				t.UserID, t.Arguments, t.CreatedAt.UTC().Format(time.RFC3339Nano)); err != nil {
				return mapError(err)
			}
			if err := insertDelivery(ctx, tx, t, w.Traceparent); err != nil {
				return err
			}
		}
		return writeItems(ctx, tx, w.Items, len(w.Tickets), w.Traceparent)
	}, now)
}

// write runs fn in one write transaction under this process's write slot
// (sqlitestore.Store.Write), committed when fn returns nil.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.claims.Write(ctx, fn)
}

// exec runs one statement in its own write transaction and returns how
// many rows it changed.
func (s *Store) exec(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return mapError(err)
		}
		n, err = res.RowsAffected()
		return mapError(err)
	})
	return n, err
}

// Purge deletes operations that expired before now and returns how many.
// Tickets and claims stay.
func (s *Store) Purge(ctx context.Context, now time.Time) (int64, error) {
	return s.claims.Purge(ctx, now)
}

// Ticket implements core.Store: its typed fields, its Attrs and its
// delivery.
func (s *Store) Ticket(ctx context.Context, id string) (core.Ticket, error) {
	var t core.Ticket
	var created string
	var attrs sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT ticket_id, operation_key, tenant_id, user_id, arguments, created_at, attrs
		FROM tickets WHERE ticket_id = ?`, id).Scan(&t.ID, &t.OperationKey, &t.TenantID, &t.UserID, &t.Arguments, &created, &attrs)
	if errors.Is(err, sql.ErrNoRows) {
		return core.Ticket{}, core.ErrNotFound
	}
	if err != nil {
		return core.Ticket{}, mapError(err)
	}
	if t.CreatedAt, err = time.Parse(time.RFC3339Nano, created); err != nil {
		return core.Ticket{}, err
	}
	if t.Attrs, err = decodeAttrs(core.TicketKey(id), attrs); err != nil {
		return core.Ticket{}, err
	}
	t.Delivery, err = s.coreDelivery(ctx, id)
	return t, err
}

// addedColumns are the columns a table made before them gains at open
// (CREATE TABLE IF NOT EXISTS leaves a table as it is): the deliveries'
// sent_at and traceparent, the tickets' attrs. Each is nullable, and NULL
// reads as it did before the column existed.
var addedColumns = []struct{ table, name, decl string }{
	{"deliveries", "sent_at", "INTEGER"},
	{"deliveries", "traceparent", "TEXT"},
	{"tickets", "attrs", "TEXT"},
}

// addColumns adds the addedColumns a table lacks. The check and the
// change run in one write transaction, so two processes opening the same
// file add each once.
func addColumns(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, col := range addedColumns {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, col.table, col.name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE `+col.table+` ADD COLUMN `+col.name+` `+col.decl); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// mapError makes SQLite errors domain errors: sqlitestore.MapError (a
// lock not obtained within the busy timeout, a cancelled or timed-out
// context → core.ErrBusy, which is idem.ErrBusy).
func mapError(err error) error { return sqlitestore.MapError(err) }
