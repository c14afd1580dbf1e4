package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/sqlitestore"
)

// A booking on SQLite: the claim and the caller's statements (the
// booking row, and the slot taken only while it is free) run in one
// BEGIN IMMEDIATE transaction. The booking references the claim that
// wrote it, so purging expired records never touches it.
func Example_booking() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idem-example")
	defer func() { _ = os.RemoveAll(dir) }()
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "bookings.sqlite"), sqlitestore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = store.Close() }()
	if _, err := store.DB().ExecContext(ctx, `
		CREATE TABLE slots (slot TEXT PRIMARY KEY, booked INTEGER NOT NULL DEFAULT 0);
		CREATE TABLE bookings (id TEXT PRIMARY KEY, slot TEXT NOT NULL, operation_key TEXT NOT NULL, generation INTEGER NOT NULL,
			FOREIGN KEY (operation_key, generation) REFERENCES claims (operation_key, generation));
		INSERT INTO slots (slot) VALUES ('mon-09:00');`); err != nil {
		fmt.Println(err)
		return
	}
	g := &idem.Guard[sqlitestore.Writes]{Store: store, Retention: time.Hour}
	book := func(customer, requestID string) idem.Outcome {
		return g.Do(ctx, idem.Call{Tenant: "clinic-1", Owner: customer, RequestID: requestID, Function: "book_slot",
			Arguments: []byte(`{"slot":"mon-09:00"}`)},
			func(cl idem.Claim) ([]byte, sqlitestore.Writes, error) {
				id := "booking-" + cl.Key.ID[:6]
				return []byte(`{"booking_id":"` + id + `"}`), func(ctx context.Context, tx *sql.Tx, c sqlitestore.Claimed) error {
					res, err := tx.ExecContext(ctx, `UPDATE slots SET booked = 1 WHERE slot = 'mon-09:00' AND booked = 0`)
					if err != nil {
						return err
					}
					if n, _ := res.RowsAffected(); n == 0 {
						return errors.New("the slot is taken")
					}
					_, err = tx.ExecContext(ctx, `INSERT INTO bookings VALUES (?, 'mon-09:00', ?, ?)`, id, c.Key, c.Generation)
					return err
				}, nil
			})
	}
	for _, o := range []idem.Outcome{book("p-1", "req-1"), book("p-1", "req-1"), book("p-2", "req-9")} {
		fmt.Println(o.Status, string(o.Result), o.Err)
	}
	// Output:
	// created {"booking_id":"booking-28a1f4"} <nil>
	// replayed {"booking_id":"booking-28a1f4"} <nil>
	// refused  idem: writes refused: the slot is taken
}
