//go:build nosqlite

package localstore

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// openSQLite refuses: this binary was built without the SQLite store
// (-tags nosqlite, the Lambda build; see docs/benchmarks.md).
func openSQLite(context.Context, string, *slog.Logger) (core.Store, io.Closer, error) {
	return nil, nil, errors.New("config: store.kind: this binary was built without SQLite (-tags nosqlite); use dynamodb or build without the tag")
}
