package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The report names the revision it measured, so a tree with uncommitted
// changes is refused, or with -allow-dirty measured and flagged.
func TestCheckClean(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "package a\n")
	git("add", "-A")
	git("commit", "-q", "-m", "a")

	if dirty, err := checkClean(dir, false); err != nil || dirty {
		t.Fatalf("clean tree: dirty=%v err=%v", dirty, err)
	}
	write("a.go", "package a // changed\n")
	if _, err := checkClean(dir, false); err == nil || !strings.Contains(err.Error(), "uncommitted changes") {
		t.Fatalf("modified file: err=%v, want a refusal", err)
	}
	if dirty, err := checkClean(dir, true); err != nil || !dirty {
		t.Fatalf("modified file with -allow-dirty: dirty=%v err=%v, want dirty and no error", dirty, err)
	}
	git("checkout", "--", "a.go")
	write("b.go", "package a\n")
	if _, err := checkClean(dir, false); err == nil {
		t.Fatalf("untracked Go file: want a refusal")
	}
}
