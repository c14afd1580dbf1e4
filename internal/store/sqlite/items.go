package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// itemsSchema is the table of core.Writes.Items other than tickets: one
// row per key, its attributes as one JSON object (encodeAttrs). A ticket's
// item is its row in tickets: the typed columns, and the other
// attributes in tickets.attrs, which a database made before it existed
// gains at open (addedColumns).
const itemsSchema = `
CREATE TABLE IF NOT EXISTS items (
	pk    TEXT PRIMARY KEY,
	attrs TEXT NOT NULL
) WITHOUT ROWID;
`

// errTicketItem refuses a write the tickets table cannot hold: a ticket
// is created by core.Writes.Tickets, with its typed fields, never by an
// item write.
var errTicketItem = errors.New("sqlite: a ticket is created by Writes.Tickets, not by an item write")

// writeItems executes items (core.Writes.Items) on tx, the claim's
// transaction, after the claim's tickets (offset of them): every
// condition is checked before anything is written (core.ApplyItemWrites),
// under the write lock the transaction holds, so a refusal is a
// *core.ConditionError and the rollback leaves nothing.
func writeItems(ctx context.Context, tx *sql.Tx, items []core.ItemWrite, offset int, traceparent string) error {
	if len(items) == 0 {
		return nil
	}
	get := func(key string) (core.Item, error) { return readItem(ctx, tx, key) }
	put := func(key string, it core.Item, e *core.Effect, isNew bool) error {
		if id, ok := strings.CutPrefix(key, core.TicketKeyPrefix); ok {
			if isNew {
				return fmt.Errorf("%w: %s does not exist", errTicketItem, key)
			}
			return putTicketAttrs(ctx, tx, id, it)
		}
		attrs, err := encodeAttrs(it)
		if err != nil {
			return err
		}
		q := `UPDATE items SET attrs = ? WHERE pk = ?`
		if isNew {
			q = `INSERT INTO items (attrs, pk) VALUES (?, ?)`
		}
		if _, err := tx.ExecContext(ctx, q, attrs, key); err != nil {
			return mapError(err)
		}
		if e == nil {
			return nil
		}
		return insertEffect(ctx, tx, key, *e, traceparent)
	}
	return core.ApplyItemWrites(items, offset, get, put)
}

// queryer is a *sql.DB or a *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readItem reads the item of key as core.ApplyItemWrites sees it: nil
// when absent; for a ticket, its tenant_id and user_id beside its attrs.
func readItem(ctx context.Context, q queryer, key string) (core.Item, error) {
	var attrs sql.NullString
	if id, ok := strings.CutPrefix(key, core.TicketKeyPrefix); ok {
		var tenant, user string
		err := q.QueryRowContext(ctx, `SELECT tenant_id, user_id, attrs FROM tickets WHERE ticket_id = ?`, id).Scan(&tenant, &user, &attrs)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, mapError(err)
		}
		return ticketItem(key, tenant, user, attrs)
	}
	err := q.QueryRowContext(ctx, `SELECT attrs FROM items WHERE pk = ?`, key).Scan(&attrs)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, mapError(err)
	}
	return decodeAttrs(key, attrs)
}

// ticketItem is a ticket's item: its attrs with its typed tenant_id and
// user_id.
func ticketItem(key, tenant, user string, attrs sql.NullString) (core.Item, error) {
	it, err := decodeAttrs(key, attrs)
	if err != nil {
		return nil, err
	}
	if it == nil {
		it = core.Item{}
	}
	it[core.AttrTenantID], it[core.AttrUserID] = tenant, user
	return it, nil
}

// putTicketAttrs writes the attributes of ticket id's item beyond its
// typed columns. tenant_id and user_id are those columns: as in every
// store, an item write does not change them.
func putTicketAttrs(ctx context.Context, tx *sql.Tx, id string, it core.Item) error {
	it = maps.Clone(it)
	delete(it, core.AttrTenantID)
	delete(it, core.AttrUserID)
	attrs, err := encodeAttrs(it)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE tickets SET attrs = ? WHERE ticket_id = ?`, attrs, id)
	if err != nil {
		return mapError(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return errors.Join(fmt.Errorf("sqlite: ticket %s: %d rows updated, want 1", id, n), mapError(err))
	}
	return nil
}

// encodeAttrs is it as the JSON object an attrs column holds: a string
// as a JSON string, an int64 as a JSON number, a bool as a JSON bool, a
// []string as an array of strings (decodeAttrs reads each back as the
// same Go type).
func encodeAttrs(it core.Item) (string, error) {
	m := make(map[string]any, len(it))
	for name, v := range it {
		switch v := v.(type) {
		case string, int64, bool:
			m[name] = v
		case []string:
			if v == nil {
				v = []string{} // an empty list, not JSON null
			}
			m[name] = v
		default:
			return "", fmt.Errorf("sqlite: attribute %s: a %T; the store keeps string, int64, bool and []string", name, v)
		}
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// decodeAttrs reads an attrs column of the item key (nil when NULL):
// numbers as int64, arrays as []string.
func decodeAttrs(key string, attrs sql.NullString) (core.Item, error) {
	if !attrs.Valid {
		return nil, nil
	}
	d := json.NewDecoder(strings.NewReader(attrs.String))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("sqlite: item %s: attrs: %w", key, err)
	}
	it := make(core.Item, len(m))
	for name, v := range m {
		switch v := v.(type) {
		case string, bool:
			it[name] = v
		case json.Number:
			n, err := v.Int64()
			if err != nil {
				return nil, fmt.Errorf("sqlite: item %s: attribute %s: %w", key, name, err)
			}
			it[name] = n
		case []any:
			l := make([]string, len(v))
			for i, e := range v {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("sqlite: item %s: attribute %s: a list holding a %T", key, name, e)
				}
				l[i] = s
			}
			it[name] = l
		default:
			return nil, fmt.Errorf("sqlite: item %s: attribute %s: a %T", key, name, v)
		}
	}
	return it, nil
}

// Items implements core.Store: one statement, so one snapshot, reads the
// tickets and the other items of keys with their delivery records.
func (s *Store) Items(ctx context.Context, keys []string) ([]core.StoredItem, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var ticketIDs, others []string
	for _, k := range keys {
		if id, ok := strings.CutPrefix(k, core.TicketKeyPrefix); ok {
			ticketIDs = append(ticketIDs, id)
		} else {
			others = append(others, k)
		}
	}
	tj, err := json.Marshal(ticketIDs)
	if err != nil {
		return nil, err
	}
	oj, err := json.Marshal(others)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `
		SELECT 'TICKET#' || t.ticket_id, 1, t.tenant_id, t.user_id, t.attrs, d.state, d.due_at, d.external_id, d.external_url
		FROM tickets AS t LEFT JOIN deliveries AS d ON d.ticket_id = t.ticket_id
		WHERE t.ticket_id IN (SELECT value FROM json_each(?))
		UNION ALL
		SELECT i.pk, 0, '', '', i.attrs, d.state, d.due_at, d.external_id, d.external_url
		FROM items AS i LEFT JOIN effect_deliveries AS d ON d.outbox_id = i.pk
		WHERE i.pk IN (SELECT value FROM json_each(?))`, string(tj), string(oj))
	if err != nil {
		return nil, mapError(err)
	}
	defer func() { _ = rows.Close() }()
	found := make(map[string]core.StoredItem, len(keys))
	for rows.Next() {
		var (
			si                   core.StoredItem
			ticket               bool
			tenant, user         string
			attrs                sql.NullString
			state, extID, extURL sql.NullString
			due                  sql.NullInt64
		)
		if err := rows.Scan(&si.Key, &ticket, &tenant, &user, &attrs, &state, &due, &extID, &extURL); err != nil {
			return nil, mapError(err)
		}
		if ticket {
			si.Attrs, err = ticketItem(si.Key, tenant, user, attrs)
		} else {
			si.Attrs, err = decodeAttrs(si.Key, attrs)
		}
		if err != nil {
			return nil, err
		}
		if si.Attrs == nil {
			si.Attrs = core.Item{}
		}
		if state.Valid {
			si.Delivery = coreStatus(state.String, due, extID.String, extURL.String)
		}
		found[si.Key] = si
	}
	if err := rows.Err(); err != nil {
		return nil, mapError(err)
	}
	out := make([]core.StoredItem, 0, len(found))
	for _, k := range keys {
		if si, ok := found[k]; ok {
			out = append(out, si)
		}
	}
	return out, nil
}
