package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/idem/idemtest"
	"github.com/aivax-examples/idempotent-callback/idem/sqlitestore"
)

// effects is the suite's own table: each effect references the claim
// that wrote it.
const effects = `CREATE TABLE IF NOT EXISTS effects (
	id TEXT PRIMARY KEY, operation_key TEXT NOT NULL, generation INTEGER NOT NULL,
	FOREIGN KEY (operation_key, generation) REFERENCES claims (operation_key, generation))`

func open(t *testing.T, path string, now func() time.Time) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.DB().Exec(effects); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	idemtest.Run(t, func(t *testing.T, now func() time.Time) idemtest.Fixture[sqlitestore.Writes] {
		path := filepath.Join(t.TempDir(), "idem.sqlite")
		s := open(t, path, now)
		return idemtest.Fixture[sqlitestore.Writes]{
			Store: s,
			Write: func(id string) sqlitestore.Writes {
				return func(ctx context.Context, tx *sql.Tx, c sqlitestore.Claimed) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO effects (id, operation_key, generation) VALUES (?, ?, ?)`, id, c.Key, c.Generation)
					return err
				}
			},
			// A write that succeeds, then a condition of the caller's that
			// fails: the rollback must take the write back too.
			Refuse: func() sqlitestore.Writes {
				return func(ctx context.Context, tx *sql.Tx, c sqlitestore.Claimed) error {
					if _, err := tx.ExecContext(ctx, `INSERT INTO effects (id, operation_key, generation) VALUES ('refused', ?, ?)`, c.Key, c.Generation); err != nil {
						return err
					}
					return errors.New("out of stock")
				}
			},
			// The context ends inside the transaction; database/sql rolls
			// the transaction back, and the caller's next statement meets
			// sql.ErrTxDone, which the function returns.
			Cancel: func(id string, cancel context.CancelFunc) sqlitestore.Writes {
				return func(_ context.Context, tx *sql.Tx, c sqlitestore.Claimed) error {
					cancel()
					return insertAfterEnd(tx, id, c)
				}
			},
			Effects: func(t *testing.T) int {
				var n int
				if err := s.DB().QueryRow(`SELECT COUNT(*) FROM effects`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
			Reopen: func(t *testing.T) idem.Store[sqlitestore.Writes] {
				_ = s.Close()
				return open(t, path, now)
			},
		}
	})
}

// insertAfterEnd waits for database/sql to roll back tx, whose context
// has ended, then inserts the effect id as a caller that did not look at
// the context would, and returns the statement's error: sql.ErrTxDone.
func insertAfterEnd(tx *sql.Tx, id string, c sqlitestore.Claimed) error {
	for range 10000 {
		var one int
		if err := tx.QueryRow(`SELECT 1`).Scan(&one); errors.Is(err, sql.ErrTxDone) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, err := tx.Exec(`INSERT INTO effects (id, operation_key, generation) VALUES (?, ?, ?)`, id, c.Key, c.Generation)
	return err
}

// A context that ends while the caller's statements run is busy whatever
// error the caller's function returns (the transaction's sql.ErrTxDone,
// the context's error, or one of its own), and nothing is written; the
// same error with the context live is the caller's refusal.
func TestEndedContextDuringWritesIsBusy(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "idem.sqlite"), time.Now)
	now := time.Now()
	rec := func(key string) idem.Record {
		return idem.Record{Key: key, State: idem.StateCompleted, Tenant: "t", Owner: "o", Function: "f", Fingerprint: "fp",
			Result: []byte(`{}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	}
	mine := errors.New("the caller's own error")
	for _, tc := range []struct {
		name   string
		cancel bool
		err    error
		busy   bool
	}{
		{"sql.ErrTxDone", false, sql.ErrTxDone, true},
		{"the context's error", true, context.Canceled, true},
		{"the caller's own error, the context ended", true, mine, true},
		{"the caller's own error, the context live", false, mine, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			held, err := s.Claim(ctx, rec(tc.name), func(ctx context.Context, tx *sql.Tx, c sqlitestore.Claimed) error {
				if tc.cancel {
					cancel()
				}
				return tc.err
			}, now)
			var refused *idem.RefusedError
			if held != nil || errors.Is(err, idem.ErrBusy) != tc.busy || errors.As(err, &refused) == tc.busy {
				t.Fatalf("held %v, err %v; want busy %v, refused %v", held, err, tc.busy, !tc.busy)
			}
			if got, err := s.Get(context.Background(), tc.name); got != nil || err != nil {
				t.Fatalf("written: %+v, %v", got, err)
			}
		})
	}
}
