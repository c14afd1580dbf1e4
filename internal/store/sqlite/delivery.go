package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/aivax-examples/idempotent-callback/internal/core"
	"github.com/aivax-examples/idempotent-callback/internal/delivery"
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
// made before it existed gains the column at open (addedColumns), as
// it gains traceparent: the W3C traceparent of the span that created the
// ticket, which the delivery's span links to (NULL when there was none).
const deliverySchema = `
CREATE TABLE IF NOT EXISTS deliveries (
	ticket_id       TEXT PRIMARY KEY REFERENCES tickets (ticket_id),
` + recordDDL + `) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS deliveries_state ON deliveries (state, ticket_id);
`

// recordDDL declares a delivery record's columns, the same in both
// outboxes (recordColumns selects them).
const recordDDL = `	state           TEXT NOT NULL CHECK (state IN ('pending', 'delivering', 'delivered', 'failed', 'unknown')),
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
`

// effectSchema is the outbox of effects (core.ItemWrite.Effect): one row
// per item with an effect, written in the transaction that puts the item,
// under the outbox id that is the item's key ("COMMENT#<comment_id>",
// delivery.IsEffect). The columns from state on are the deliveries'; kind,
// effect_id (the delivery key), ticket_id (the ticket it follows, empty
// for none) and payload are what a claim hands the engine. A table of its
// own, created if missing, because deliveries.ticket_id references
// tickets.
const effectSchema = `
CREATE TABLE IF NOT EXISTS effect_deliveries (
	outbox_id       TEXT PRIMARY KEY REFERENCES items (pk),
	kind            TEXT NOT NULL,
	effect_id       TEXT NOT NULL,
	ticket_id       TEXT NOT NULL,
	payload         TEXT NOT NULL,
` + recordDDL + `) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS effect_deliveries_due ON effect_deliveries (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS effect_deliveries_state ON effect_deliveries (state, outbox_id);
`

// outbox names the table holding the record of outbox id, and its id
// column: a ticket's record is in deliveries, an effect's in
// effect_deliveries.
func outbox(id string) (table, idColumn string) {
	if delivery.IsEffect(id) {
		return "effect_deliveries", "outbox_id"
	}
	return "deliveries", "ticket_id"
}

var (
	_ delivery.Outbox         = (*Store)(nil)
	_ delivery.WaitingCounter = (*Store)(nil)
)

// insertDelivery writes t's outbox row inside the ticket's transaction,
// when the service asked for one.
func insertDelivery(ctx context.Context, tx *sql.Tx, t core.Ticket, traceparent string) error {
	if t.Delivery == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO deliveries (ticket_id, state, due_at, traceparent) VALUES (?, ?, ?, ?)`,
		t.ID, t.Delivery.State, t.Delivery.DueAt.Unix(), nullString(traceparent))
	return mapError(err)
}

// insertEffect writes the outbox row of the effect of the item key inside
// the item's transaction: pending, due at e.DueAt, never sent.
func insertEffect(ctx context.Context, tx *sql.Tx, key string, e core.Effect, traceparent string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO effect_deliveries (outbox_id, kind, effect_id, ticket_id, payload, state, due_at, traceparent)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		key, e.Kind, e.ID, e.TicketID, string(e.Payload), string(delivery.StatePending), e.DueAt.Unix(), nullString(traceparent))
	return mapError(err)
}

// recordColumns are the delivery columns every outbox table has, of its
// rows as d, in scanDelivery's order after the id and the kind.
const recordColumns = `d.state, d.attempts, d.lookup_failures, d.sent_unknown, d.sent_at, d.due_at,
	d.lease_until, d.lease_owner, d.error, d.external_id, d.external_url, d.delivered_at, d.traceparent`

// A record's id and kind and recordColumns, as scanDelivery reads them,
// from each table (as d).
const (
	ticketRecord = `d.ticket_id AS id, '` + delivery.KindTicket + `' AS kind, ` + recordColumns
	effectRecord = `d.outbox_id AS id, d.kind AS kind, ` + recordColumns
)

// selectRecord selects the record of outbox id as scanDelivery reads it
// (the id bound once).
func selectRecord(id string) string {
	if delivery.IsEffect(id) {
		return `SELECT ` + effectRecord + ` FROM effect_deliveries AS d WHERE d.outbox_id = ?`
	}
	return `SELECT ` + ticketRecord + ` FROM deliveries AS d WHERE d.ticket_id = ?`
}

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
	dest := append([]any{&r.TicketID, &r.Kind, &state, &r.Attempts, &r.LookupFailures, &unknown, &sentAt, &due,
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
	if delivery.IsEffect(id) {
		r, err := scanDelivery(s.db.QueryRowContext(ctx, selectRecord(id), id))
		if errors.Is(err, sql.ErrNoRows) {
			return delivery.Record{}, delivery.ErrNoRecord
		}
		return r, mapError(err)
	}
	// A ticket's record, with its follow-ups from the same row's attrs.
	var attrs sql.NullString
	r, err := scanDelivery(s.db.QueryRowContext(ctx, `SELECT `+ticketRecord+`, t.attrs
		FROM deliveries AS d JOIN tickets AS t ON t.ticket_id = d.ticket_id WHERE d.ticket_id = ?`, id), &attrs)
	if errors.Is(err, sql.ErrNoRows) {
		return delivery.Record{}, delivery.ErrNoRecord
	}
	if err != nil {
		return delivery.Record{}, mapError(err)
	}
	it, err := decodeAttrs(core.TicketKey(id), attrs)
	r.FollowUps = it.List(core.AttrFollowUps)
	return r, err
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

// coreStatus is a record's delivery as core shows it, from its columns.
func coreStatus(state string, due sql.NullInt64, externalID, externalURL string) *core.DeliveryStatus {
	r := delivery.Record{Update: delivery.Update{State: delivery.State(state), ExternalID: externalID, ExternalURL: externalURL}}
	if due.Valid {
		r.DueAt = time.Unix(due.Int64, 0)
	}
	return r.Core()
}

// Due implements delivery.Outbox: the first limit of each table, on its
// partial index on due_at, merged in order.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM (
		SELECT * FROM (SELECT ticket_id AS id, due_at FROM deliveries
			WHERE due_at IS NOT NULL AND due_at <= ? ORDER BY due_at, ticket_id LIMIT ?)
		UNION ALL
		SELECT * FROM (SELECT outbox_id, due_at FROM effect_deliveries
			WHERE due_at IS NOT NULL AND due_at <= ? ORDER BY due_at, outbox_id LIMIT ?)
		) ORDER BY due_at, id LIMIT ?`, now.Unix(), limit, now.Unix(), limit, limit)
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

// Waiting implements delivery.WaitingCounter: the live rows of both
// tables, counted on their indexes by state.
func (s *Store) Waiting(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM deliveries WHERE state IN ('pending', 'delivering')) +
		(SELECT COUNT(*) FROM effect_deliveries WHERE state IN ('pending', 'delivering'))`).Scan(&n)
	return n, mapError(err)
}

// Claim implements delivery.Outbox: one write transaction reads the row and
// its ticket (or, for an effect's row, its effect), and moves it to
// delivering only if it is claimable. A claimed row that cannot be read
// stays claimed and is returned with delivery.ErrUnreadable.
func (s *Store) Claim(ctx context.Context, id, owner string, now, leaseUntil time.Time) (c delivery.Claimed, err error) {
	var (
		before                             delivery.Record
		opKey, tenant, user, args, created string
		effect                             *delivery.Effect
		payload                            string
	)
	var readErr error
	err = s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if delivery.IsEffect(id) {
			effect = &delivery.Effect{}
			before, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+effectRecord+`, d.effect_id, d.ticket_id, d.payload
				FROM effect_deliveries AS d WHERE d.outbox_id = ?`, id), &effect.ID, &effect.TicketID, &payload)
			effect.Kind, effect.Payload = before.Kind, []byte(payload)
		} else {
			before, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+ticketRecord+`,
				t.operation_key, t.tenant_id, t.user_id, t.arguments, t.created_at
				FROM deliveries AS d JOIN tickets AS t ON t.ticket_id = d.ticket_id WHERE d.ticket_id = ?`, id),
				&opKey, &tenant, &user, &args, &created)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return delivery.ErrNotClaimable
		}
		unreadable := errors.Is(err, delivery.ErrUnreadable)
		if err != nil && !unreadable {
			return mapError(err)
		}
		readErr = err
		table, col := outbox(id)
		//nolint:gosec // table and col are outbox's constants; every value is bound
		res, err := tx.ExecContext(ctx, `UPDATE `+table+` SET state = 'delivering', lease_owner = ?, lease_until = ?, due_at = ?
			WHERE `+col+` = ? AND ((state = 'pending' AND due_at <= ?) OR (state = 'delivering' AND lease_until < ?))`,
			owner, leaseUntil.Unix(), leaseUntil.Unix()+1, id, now.Unix(), now.Unix())
		if err != nil {
			return mapError(err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errors.Join(delivery.ErrNotClaimable, err)
		}
		// The claim is committed even when the ticket cannot be read: the
		// engine then records it failed, instead of the rollback leaving it
		// due for every poll to hit the same error.
		if readErr == nil && effect == nil {
			createdAt, err := time.Parse(time.RFC3339Nano, created)
			if err != nil {
				readErr = delivery.Unreadable(id, fmt.Errorf("sqlite: created_at: %w", err))
			} else if c.Ticket, err = delivery.NewTicket(core.Ticket{ID: id, OperationKey: opKey,
				TenantID: tenant, UserID: user, Arguments: args, CreatedAt: createdAt}); err != nil {
				readErr = delivery.Unreadable(id, err)
			}
		}
		return nil
	})
	if err != nil {
		return delivery.Claimed{}, err
	}
	c.Before, c.Effect = before, effect
	if readErr != nil || effect != nil {
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
	table, col := outbox(id)
	args := append([]any{string(u.State), u.Attempts, u.LookupFailures, u.SentUnknown, sentAt, due, nullString(u.Error),
		nullString(u.ExternalID), nullString(u.ExternalURL), delivered, id}, condArgs...)
	//nolint:gosec // table, col and cond are this file's constants; every value is bound
	return s.exec(ctx, `UPDATE `+table+` SET state = ?, attempts = ?, lookup_failures = ?, sent_unknown = ?,
		sent_at = ?, due_at = ?, lease_until = NULL, lease_owner = NULL, error = ?, external_id = ?, external_url = ?, delivered_at = ?
		WHERE `+col+` = ? AND `+cond, args...)
}

var _ delivery.Admin = (*Store)(nil)

// List implements delivery.Admin: the first limit of each table, on its
// index by state, merged by id.
func (s *Store) List(ctx context.Context, state delivery.State, limit int) ([]delivery.Record, error) {
	limit = max(limit, 0)
	rows, err := s.db.QueryContext(ctx, `SELECT * FROM (
		SELECT * FROM (SELECT `+ticketRecord+` FROM deliveries AS d WHERE d.state = ? ORDER BY d.ticket_id LIMIT ?)
		UNION ALL
		SELECT * FROM (SELECT `+effectRecord+` FROM effect_deliveries AS d WHERE d.state = ? ORDER BY d.outbox_id LIMIT ?)
		) ORDER BY id LIMIT ?`, string(state), limit, string(state), limit, limit)
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

var _ delivery.Sequencer = (*Store)(nil)

// Neighbours implements delivery.Sequencer: one statement reads the
// ticket the record follows and that ticket's follow-ups.
func (s *Store) Neighbours(ctx context.Context, id string) (ticket, before, after string, err error) {
	var attrs sql.NullString
	if delivery.IsEffect(id) {
		err = s.db.QueryRowContext(ctx, `SELECT e.ticket_id, t.attrs FROM effect_deliveries AS e
			LEFT JOIN tickets AS t ON t.ticket_id = e.ticket_id WHERE e.outbox_id = ?`, id).Scan(&ticket, &attrs)
		if errors.Is(err, sql.ErrNoRows) {
			return "", "", "", delivery.ErrNoRecord
		}
	} else {
		ticket = id
		err = s.db.QueryRowContext(ctx, `SELECT attrs FROM tickets WHERE ticket_id = ?`, id).Scan(&attrs)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil // no follow-ups: the ticket alone
		}
	}
	if err != nil {
		return "", "", "", mapError(err)
	}
	if ticket == "" {
		return "", "", "", nil
	}
	it, err := decodeAttrs(core.TicketKey(ticket), attrs)
	if err != nil {
		return "", "", "", err
	}
	before, after = delivery.Neighbours(ticket, it.List(core.AttrFollowUps), id)
	return ticket, before, after, nil
}

// Wake implements delivery.Sequencer: one UPDATE conditional on the
// record being pending, never sent or looked up, and due after now.
func (s *Store) Wake(ctx context.Context, id string, now time.Time) error {
	table, col := outbox(id)
	//nolint:gosec // table and col are outbox's constants; every value is bound
	_, err := s.exec(ctx, `UPDATE `+table+` SET due_at = ?
		WHERE `+col+` = ? AND state = 'pending' AND attempts = 0 AND lookup_failures = 0 AND sent_unknown = 0 AND due_at > ?`,
		now.Unix(), id, now.Unix())
	return err
}
