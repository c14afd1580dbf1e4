// Package helpdesktest holds the checks the tests of the helpdesk client
// packages (httpsend, zendesk, webhook) share.
package helpdesktest

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/delivery"
)

// SendError is err as a *delivery.SendError; the test stops when it is
// not one.
func SendError(tb testing.TB, err error) *delivery.SendError {
	tb.Helper()
	var se *delivery.SendError
	if !errors.As(err, &se) {
		tb.Fatalf("error %v (%T) is not a *delivery.SendError", err, err)
	}
	return se
}

// Golden compares got with the file testdata/name, after writing got
// there when update is set (the tests' -update flag).
func Golden(tb testing.TB, name string, got []byte, update bool) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil { //nolint:gosec // a golden file checked into the repository, readable like its neighbours
			tb.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		tb.Fatalf("%s:\n got %s\nwant %s", name, got, want)
	}
}

// ClosedAddr is a loopback host:port nothing listens on: a call to it
// fails to dial, so nothing is sent.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
