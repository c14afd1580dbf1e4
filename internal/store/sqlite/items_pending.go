package sqlite

import (
	"context"
	"errors"

	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// Items implements core.Store. Not yet written: this file is replaced by
// the store's generic items (core.Writes.Items) in the next step.
func (s *Store) Items(context.Context, []string) ([]core.StoredItem, error) {
	return nil, errors.New("sqlite: Items not yet implemented")
}
