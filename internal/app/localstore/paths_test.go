package localstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/config"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/configtest"
)

// load reads the config file at path and checks its store block, as each
// local program does at start; c.Store is the block checked.
func load(path string) (config.Local, error) {
	c, err := config.LoadFile(path)
	if err == nil {
		var s Settings
		s, err = CheckSettings(c.Store, c.Dir)
		c.Store = s.s
	}
	return c, err
}

// loadIn writes a config file with the given store.path into a fresh
// folder and loads it, from another working directory, so that a path
// resolved against the working directory would be visibly wrong.
func loadIn(t *testing.T, storePath string) (config.Local, string, error) {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(t.TempDir())
	path := filepath.Join(dir, "config.json")
	body := `{"store": {"kind": "sqlite", "path": ` + quote(storePath) + `}, "hook_key": "k"}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := load(path)
	return c, dir, err
}

func quote(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		if r == '"' || r == '\\' {
			b = append(b, '\\')
		}
		b = append(b, string(r)...)
	}
	return string(append(b, '"'))
}

// A relative store.path is taken from the config file's folder, whatever
// the working directory: "tickets.sqlite", "./x", "data/x" as people write
// them.
func TestRelativeStorePathIsTheConfigFilesFolder(t *testing.T) {
	for _, p := range []string{"tickets.sqlite", "./x.sqlite", "data/x.sqlite", "data/../y.sqlite"} {
		t.Run(p, func(t *testing.T) {
			c, dir, err := loadIn(t, p)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(dir, p); c.Store.Path != want {
				t.Fatalf("store.path %q = %q, want %q", p, c.Store.Path, want)
			}
		})
	}
}

// The default path, with no store block, is the config file's folder too.
func TestDefaultStorePathIsTheConfigFilesFolder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(t.TempDir())
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{"hook_key": "k"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := load(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, DefaultSQLitePath); c.Store.Path != want {
		t.Fatalf("store.path = %q, want %q", c.Store.Path, want)
	}
}

// An absolute path is kept as written, whatever characters it holds.
func TestAbsoluteStorePathIsKept(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a b", "ü?#%41.sqlite")
	c, _, err := loadIn(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Path != p {
		t.Fatalf("store.path = %q, want %q", c.Store.Path, p)
	}
}

// "~/" is the home folder: JSON is not a shell, so nothing else expands it.
func TestTildeIsTheHomeFolder(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	c, _, err := loadIn(t, "~/data/t.sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "data", "t.sqlite"); c.Store.Path != want {
		t.Fatalf("store.path = %q, want %q", c.Store.Path, want)
	}
}

// What is not a plain file path is refused with one line naming the field
// and the value, and nothing is opened or created.
func TestStorePathsThatAreNotFilesAreRefused(t *testing.T) {
	for _, p := range []string{":memory:", "file:x.sqlite", "file:///tmp/x.sqlite", "~bob/x.sqlite"} {
		t.Run(p, func(t *testing.T) {
			_, dir, err := loadIn(t, p)
			configtest.OneLine(t, err, "store.path", p)
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Fatalf("the config's folder holds %d entries, want only the config file", len(entries))
			}
		})
	}
}

// TestStoreSettingsRefused: a store kind other than sqlite and dynamodb,
// and dynamodb without a table, stop the program at start with one line
// naming the setting.
func TestStoreSettingsRefused(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // what the error names
	}{
		{"store.kind postgres -> store.kind", `{"store":{"kind":"postgres"}}`, []string{"store.kind", "postgres"}},
		{"dynamodb without table -> store.table", `{"store":{"kind":"dynamodb"}}`, []string{"store.table"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.ParseFile([]byte(tc.file))
			if err == nil {
				_, err = CheckSettings(c.Store, c.Dir)
			}
			configtest.OneLine(t, err, tc.want...)
		})
	}
}
