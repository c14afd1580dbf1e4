package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// BuildBootstrap builds ./functions/callback as the Makefile's Lambda build
// does (linux, CGO_ENABLED=0, -trimpath, -ldflags='-s -w') with tags, for
// goarch, into out, and returns the binary's size in bytes.
func BuildBootstrap(t testing.TB, tags, goarch, out string) int64 {
	t.Helper()
	return BuildFunction(t, "./functions/callback", tags, goarch, out)
}

// BuildFunction is BuildBootstrap for the function in pkg (a path such as
// ./functions/delivery, relative to the repository's root).
func BuildFunction(t testing.TB, pkg, tags, goarch, out string) int64 {
	t.Helper()
	cmd := exec.Command("go", "build", "-tags", tags, "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s (%s): %v\n%s", tags, goarch, err, b)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
