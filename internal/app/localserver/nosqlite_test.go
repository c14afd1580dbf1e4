//go:build nosqlite

package localserver

import (
	"context"
	"strings"
	"testing"
)

// Built without SQLite, a local configuration that asks for it stops at
// start with an error naming the setting and the tag.
func TestLocalSQLiteLeftOut(t *testing.T) {
	_, _, err := LocalServer(context.Background(), checked(t, localConfig(t, "k")), discard(), nil)
	if err == nil || !strings.Contains(err.Error(), "store.kind") || !strings.Contains(err.Error(), "nosqlite") {
		t.Fatalf("err = %v; want one naming store.kind and the nosqlite tag", err)
	}
}
