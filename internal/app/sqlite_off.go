//go:build nosqlite

package app

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// SQLiteIncluded reports whether this binary carries the SQLite store. The
// Lambda build leaves it out (-tags nosqlite): see docs/benchmarks.md.
const SQLiteIncluded = false

func openSQLite(context.Context, string, *slog.Logger) (core.Store, io.Closer, error) {
	return nil, nil, errors.New("config: store.kind: this binary was built without SQLite (-tags nosqlite); use dynamodb or build without the tag")
}
