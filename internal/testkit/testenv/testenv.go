package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	stopMu   sync.Mutex
	stoppers []func() // stop the processes started here; run by Main
)

// Main runs the tests of m, stops what this package started, and exits with
// m.Run's code. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	stopAll()
	os.Exit(code)
}

func stopAll() {
	stopMu.Lock()
	defer stopMu.Unlock()
	for _, stop := range stoppers {
		stop()
	}
	stoppers = nil
}

// missing skips t, or fails it under CI=true, because a tool is not installed.
func missing(t testing.TB, msg string) {
	t.Helper()
	msg += " (install it with `make tools` or scripts/tools.sh)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true, so this is a failure, not a skip")
	}
	t.Skip(msg)
}

// RepoRoot returns the module root: the nearest directory at or above the
// working directory that holds go.mod.
func RepoRoot(t testing.TB) string {
	t.Helper()
	return orFatal(t, repoRoot)
}

// orFatal returns what f returns, or fails t with f's error.
func orFatal[T any](t testing.TB, f func() (T, error)) T {
	t.Helper()
	v, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.mod at or above the working directory")
		}
		dir = parent
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	return orFatal(t, freePort)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testenv: free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RIE returns the path of the aws-lambda-rie binary in <repo>/.cache/bin.
// See the package doc for its flags.
func RIE(t testing.TB) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), ".cache", "bin", "aws-lambda-rie")
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		missing(t, "aws-lambda-rie not found at "+p)
	}
	return p
}

var tableSeq atomic.Int64
