// Package golden compares a test's output with a file checked in under
// the test's testdata folder, and rewrites that file when the test binary
// runs with -update.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is the -update flag of every test binary that imports golden.
var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Check compares got with the file testdata/name, after writing got there
// when the test binary runs with -update. A missing file fails the test
// with the command that creates it.
func Check(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil { //nolint:gosec // a golden file checked into the repository, readable like its neighbours
			tb.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run go test -update once to create it)", err)
	}
	if !bytes.Equal(got, want) {
		tb.Errorf("%s differs from the golden file:\n got %s\nwant %s", name, got, want)
	}
}
