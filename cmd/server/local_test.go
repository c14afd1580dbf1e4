package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/nonce"
)

// buildLocal builds the local server as make run runs it (SQLite
// included, no Lambda tags) into a temporary directory, and beside it the
// operator's command (operatorBin).
func buildLocal(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the local server binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "server")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command(goBin, "build", "-o", operatorBin(bin), "../deliveries").CombinedOutput(); err != nil {
		t.Fatalf("go build ../deliveries: %v\n%s", err, out)
	}
	return bin
}

// operatorBin is the operator's command that buildLocal built beside the
// local server bin.
func operatorBin(bin string) string { return filepath.Join(filepath.Dir(bin), "deliveries") }

// localCommand is the binary with args, in a temporary directory, with
// this environment less AWS_LAMBDA_RUNTIME_API: the local server, not the
// Lambda.
func localCommand(t *testing.T, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_LAMBDA_RUNTIME_API=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// runLocalBinary runs the binary with args and no Lambda environment, and
// returns its exit status, stdout and stderr.
func runLocalBinary(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := localCommand(t, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run: %v", err)
	}
	return code, stdout.String(), stderr.String()
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLocalServerBadConfigOneLine: bad configuration stops the local
// server at start with exit status 1 and exactly one stderr line naming the
// field (docs/contract.md, Configuration).
func TestLocalServerBadConfigOneLine(t *testing.T) {
	tests := []struct {
		name   string
		config string
		want   string // the field the line names
	}{
		{"unknown field hook_kye -> one line naming hook_kye",
			`{"listen":"127.0.0.1:0","hook_kye":"local-demo-hook-key"}`, `"hook_kye"`},
		{"store.kind nope -> one line naming store.kind",
			`{"listen":"127.0.0.1:0","store":{"kind":"nope"},"hook_key":"k"}`, "store.kind"},
		{"insecure_no_auth on 0.0.0.0 -> one line naming insecure_no_auth",
			`{"listen":"0.0.0.0:0","insecure_no_auth":true}`, "insecure_no_auth"},
		{"user without tenant_id -> one line naming users.user-x",
			`{"users":{"user-x":{"user_id":"x"}},"hook_key":"k"}`, "users.user-x"},
	}
	bin := buildLocal(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runLocalBinary(t, bin, "-config", writeConfig(t, tc.config))
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			line, ok := strings.CutSuffix(stderr, "\n")
			if !ok || line == "" || strings.Contains(line, "\n") {
				t.Fatalf("stderr %q, want exactly one line", stderr)
			}
			if !strings.HasPrefix(line, "config:") || !strings.Contains(line, tc.want) {
				t.Errorf("stderr line %q, want \"config: ...\" naming %s", line, tc.want)
			}
		})
	}
}

func TestLocalNonceFlag(t *testing.T) {
	const hookKey = "local-demo-hook-key"
	tests := []struct {
		name     string
		config   string
		wantCode int
	}{
		{"hook_key set -> a $2a$09$ nonce on stdout", `{"hook_key":"` + hookKey + `"}`, 0},
		{"no hook_key -> exit 1 naming hook_key", `{"insecure_no_auth":true}`, 1},
	}
	bin := buildLocal(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runLocalBinary(t, bin, "-config", writeConfig(t, tc.config), "-nonce")
			if code != tc.wantCode {
				t.Fatalf("exit status %d, want %d (stderr %q)", code, tc.wantCode, stderr)
			}
			if tc.wantCode != 0 {
				if stdout != "" || !strings.Contains(stderr, "hook_key") || strings.Count(stderr, "\n") != 1 {
					t.Errorf("stdout %q stderr %q, want one stderr line naming hook_key", stdout, stderr)
				}
				return
			}
			n := strings.TrimSuffix(stdout, "\n")
			if len(n) != 60 || !strings.HasPrefix(n, "$2a$09$") || strings.Contains(n, "\n") {
				t.Fatalf("stdout %q, want one 60-character $2a$09$ hash", stdout)
			}
			v, err := nonce.New(hookKey, 4, 12)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Verify(n); err != nil {
				t.Errorf("Verify(%q): %v", n, err)
			}
			other, _ := nonce.New("another-key", 4, 12)
			if other.Verify(n) == nil {
				t.Error("the nonce also verifies against another key")
			}
		})
	}
}
