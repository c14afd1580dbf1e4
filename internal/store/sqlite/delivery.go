package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
	"github.com/aivax-examples/idempotent-callback/internal/tracing"
)

// deliverySchema is the outbox: one row per ticket that is to be
// delivered, written in the transaction that creates the ticket. A table
// of its own, created if missing, so a database file without it opens
// unchanged: its tickets have no row and are never delivered.
// due_at (epoch seconds) is when the row may next be claimed: the backoff's
// end while pending, the second after the lease while delivering, NULL once
// final; the partial index holds only live rows. deliveries_state serves the
// operator's listing by state. sent_at (epoch milliseconds) is the start of
// the last send whose outcome is unknown, NULL when none is; a database
// made before it existed gains the column at open (migrateDeliveries), as
// it gains traceparent: the W3C traceparent of the span that created the
// ticket, which the delivery's span links to (NULL when there was none).
const deliverySchema = `
CREATE TABLE IF NOT EXISTS deliveries (
	ticket_id       TEXT PRIMARY KEY REFERENCES tickets (ticket_id),
	state           TEXT NOT NULL CHECK (state IN ('pending', 'delivering', 'delivered', 'failed', 'unknown')),
	attempts        INTEGER NOT NULL DEFAULT 0,
	lookup_failures INTEGER NOT NULL DEFAULT 0,
	sent_unknown    INTEGER NOT NULL DEFAULT 0,
	sent_at         INTEGER,
	due_at          INTEGER,
	lease_until     INTEGER,
	lease_owner     TEXT,
	error           TEXT,
	external_id     TEXT,
	external_url    TEXT,
	delivered_at    TEXT,
	traceparent     TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS deliveries_state ON deliveries (state, ticket_id);
`

// migrateDeliveries adds to a deliveries table made before it existed
// the sent_at column, which CREATE TABLE IF NOT EXISTS leaves out. The
// check and the change run in one write transaction, so two processes
// opening the same file add it once.
func migrateDeliveries(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, col := range []struct{ name, decl string }{{"sent_at", "INTEGER"}, {"traceparent", "TEXT"}} {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('deliveries') WHERE name = ?`, col.name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE deliveries ADD COLUMN `+col.name+` `+col.decl); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

var (
	_ delivery.Outbox         = (*Store)(nil)
	_ delivery.WaitingCounter = (*Store)(nil)
)

// insertDelivery writes t's outbox row inside the ticket's transaction,
// when the service asked for one.
func insertDelivery(ctx context.Context, tx *sql.Tx, t core.Ticket) error {
	if t.Delivery == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO deliveries (ticket_id, state, due_at, traceparent) VALUES (?, ?, ?, ?)`,
		t.ID, t.Delivery.State, t.Delivery.DueAt.Unix(), nullString(tracing.Traceparent(ctx)))
	return mapError(err)
}

const deliveryColumns = `d.ticket_id, d.state, d.attempts, d.lookup_failures, d.sent_unknown, d.sent_at, d.due_at,
	d.lease_until, d.lease_owner, d.error, d.external_id, d.external_url, d.delivered_at, d.traceparent`

type scanner interface{ Scan(dest ...any) error }

func scanDelivery(row scanner, extra ...any) (delivery.Record, error) {
	var (
		r                                    delivery.Record
		state                                string
		unknown                              bool
		sentAt, due, lease                   sql.NullInt64
		owner, msg, extID, extURL, delivered sql.NullString
		traceparent                          sql.NullString
	)
	dest := append([]any{&r.TicketID, &state, &r.Attempts, &r.LookupFailures, &unknown, &sentAt, &due,
		&lease, &owner, &msg, &extID, &extURL, &delivered, &traceparent}, extra...)
	if err := row.Scan(dest...); err != nil {
		return delivery.Record{}, err
	}
	r.State, r.SentUnknown = delivery.State(state), unknown
	r.LeaseOwner, r.Error, r.ExternalID, r.ExternalURL = owner.String, msg.String, extID.String, extURL.String
	r.Traceparent = traceparent.String
	if sentAt.Valid {
		r.SentAt = time.UnixMilli(sentAt.Int64)
	}
	if due.Valid {
		r.DueAt = time.Unix(due.Int64, 0)
	}
	if lease.Valid {
		r.LeaseUntil = time.Unix(lease.Int64, 0)
	}
	if delivered.Valid {
		t, err := time.Parse(time.RFC3339Nano, delivered.String)
		if err != nil {
			return r, delivery.Unreadable(r.TicketID, fmt.Errorf("sqlite: delivered_at: %w", err))
		}
		r.DeliveredAt = t
	}
	return r, nil
}

// Delivery implements delivery.Outbox.
func (s *Store) Delivery(ctx context.Context, id string) (delivery.Record, error) {
	r, err := scanDelivery(s.db.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries AS d WHERE d.ticket_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return delivery.Record{}, delivery.ErrNoRecord
	}
	return r, mapError(err)
}

// coreDelivery is the ticket's delivery as get_ticket shows it; nil when
// the ticket has none.
func (s *Store) coreDelivery(ctx context.Context, id string) (*core.DeliveryStatus, error) {
	r, err := s.Delivery(ctx, id)
	switch {
	case errors.Is(err, delivery.ErrNoRecord):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return r.Core(), nil
}

// Due implements delivery.Outbox: the partial index on due_at, in order.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT ticket_id FROM deliveries
		WHERE due_at IS NOT NULL AND due_at <= ? ORDER BY due_at, ticket_id LIMIT ?`, now.Unix(), limit)
	if err != nil {
		return nil, mapError(err)
	}
	defer func() { _ = rows.Close() }()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, mapError(err)
		}
		ids = append(ids, id)
	}
	return ids, mapError(rows.Err())
}

// Waiting implements delivery.WaitingCounter: the live rows, counted on
// the index by state.
func (s *Store) Waiting(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM deliveries WHERE state IN ('pending', 'delivering')`).Scan(&n)
	return n, mapError(err)
}

// Claim implements delivery.Outbox: one write transaction reads the row and
// its ticket, and moves it to delivering only if it is claimable. A claimed
// row whose ticket cannot be read stays claimed and is returned with
// delivery.ErrUnreadable.
func (s *Store) Claim(ctx context.Context, id, owner string, now, leaseUntil time.Time) (c delivery.Claimed, err error) {
	tx, err := s.beginWrite(ctx)
	if err != nil {
		return c, err
	}
	defer s.unlockWrites()
	defer func() { _ = tx.Rollback() }()
	var opKey, tenant, user, args, created string
	before, err := scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+`,
		t.operation_key, t.tenant_id, t.user_id, t.arguments, t.created_at
		FROM deliveries AS d JOIN tickets AS t ON t.ticket_id = d.ticket_id WHERE d.ticket_id = ?`, id),
		&opKey, &tenant, &user, &args, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return c, delivery.ErrNotClaimable
	}
	unreadable := errors.Is(err, delivery.ErrUnreadable)
	if err != nil && !unreadable {
		return c, mapError(err)
	}
	readErr := err
	res, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'delivering', lease_owner = ?, lease_until = ?, due_at = ?
		WHERE ticket_id = ? AND ((state = 'pending' AND due_at <= ?) OR (state = 'delivering' AND lease_until < ?))`,
		owner, leaseUntil.Unix(), leaseUntil.Unix()+1, id, now.Unix(), now.Unix())
	if err != nil {
		return c, mapError(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return c, errors.Join(delivery.ErrNotClaimable, err)
	}
	// The claim is committed even when the ticket cannot be read: the
	// engine then records it failed, instead of the rollback leaving it
	// due for every poll to hit the same error.
	if readErr == nil {
		createdAt, err := time.Parse(time.RFC3339Nano, created)
		if err != nil {
			readErr = delivery.Unreadable(id, fmt.Errorf("sqlite: created_at: %w", err))
		} else if c.Ticket, err = delivery.NewTicket(core.Ticket{ID: id, OperationKey: opKey,
			TenantID: tenant, UserID: user, Arguments: args, CreatedAt: createdAt}); err != nil {
			readErr = delivery.Unreadable(id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return delivery.Claimed{}, mapError(err)
	}
	c.Before = before
	if readErr != nil {
		c.Ticket = delivery.HelpdeskTicket{ID: id}
	}
	return c, readErr
}

// Record implements delivery.Outbox: one conditional UPDATE, on the lease
// owner still holding the row.
func (s *Store) Record(ctx context.Context, id, owner string, u delivery.Update) error {
	n, err := s.writeUpdate(ctx, id, u, `state = 'delivering' AND lease_owner = ?`, owner)
	if err != nil {
		return err
	}
	if n != 1 {
		return delivery.ErrLeaseLost
	}
	return nil
}

// writeUpdate writes u on the row of id where cond holds, and returns how
// many rows it changed.
func (s *Store) writeUpdate(ctx context.Context, id string, u delivery.Update, cond string, condArgs ...any) (int64, error) {
	var due, delivered, sentAt any
	if !u.SentAt.IsZero() {
		sentAt = u.SentAt.UnixMilli()
	}
	if u.State == delivery.StatePending {
		due = u.DueAt.Unix()
	}
	if u.State == delivery.StateDelivered {
		delivered = u.DeliveredAt.UTC().Format(time.RFC3339Nano)
	}
	if err := s.lockWrites(ctx); err != nil {
		return 0, err
	}
	defer s.unlockWrites()
	args := append([]any{string(u.State), u.Attempts, u.LookupFailures, u.SentUnknown, sentAt, due, nullString(u.Error),
		nullString(u.ExternalID), nullString(u.ExternalURL), delivered, id}, condArgs...)
	//nolint:gosec // cond is one of this file's constant conditions; every value is bound
	res, err := s.db.ExecContext(ctx, `UPDATE deliveries SET state = ?, attempts = ?, lookup_failures = ?, sent_unknown = ?,
		sent_at = ?, due_at = ?, lease_until = NULL, lease_owner = NULL, error = ?, external_id = ?, external_url = ?, delivered_at = ?
		WHERE ticket_id = ? AND `+cond, args...)
	if err != nil {
		return 0, mapError(err)
	}
	n, err := res.RowsAffected()
	return n, mapError(err)
}

var _ delivery.Admin = (*Store)(nil)

// List implements delivery.Admin, on the index by state.
func (s *Store) List(ctx context.Context, state delivery.State, limit int) ([]delivery.Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries AS d
		WHERE d.state = ? ORDER BY d.ticket_id LIMIT ?`, string(state), max(limit, 0))
	if err != nil {
		return nil, mapError(err)
	}
	defer func() { _ = rows.Close() }()
	var out []delivery.Record
	for rows.Next() {
		r, err := scanDelivery(rows)
		if err != nil {
			return nil, mapError(err)
		}
		out = append(out, r)
	}
	return out, mapError(rows.Err())
}

// Settle implements delivery.Admin: one UPDATE conditional on the record
// read (state, counts, "may be in the helpdesk" and send start); when it
// changes nothing, a read says why.
func (s *Store) Settle(ctx context.Context, id string, read delivery.Record, u delivery.Update) error {
	var sentAt any
	if !read.SentAt.IsZero() {
		sentAt = read.SentAt.UnixMilli()
	}
	n, err := s.writeUpdate(ctx, id, u, `state = ? AND attempts = ? AND lookup_failures = ? AND sent_unknown = ? AND sent_at IS ?`,
		string(read.State), read.Attempts, read.LookupFailures, read.SentUnknown, sentAt)
	if err != nil || n == 1 {
		return err
	}
	r, err := s.Delivery(ctx, id)
	if err != nil {
		return err
	}
	return delivery.Refusal(id, r, read)
}

func nullString(v string) any {
	if v == "" {
		return nil
	}
	return v
}
