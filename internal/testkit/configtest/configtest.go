// Package configtest holds what the tests of the configuration and of the
// packages that check its settings share.
package configtest

import (
	"strings"
	"testing"
)

// OneLine fails t unless err is one line starting with "config:" that
// contains every one of want: how a bad setting stops a program at start.
func OneLine(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one naming %q", want)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "config:") {
		t.Errorf("error %q does not start with \"config:\"", msg)
	}
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error %q is more than one line", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not name %q", msg, w)
		}
	}
}

// Env is a getenv of the callback function's environment: vars, with
// TABLE_NAME, which every configuration of it needs, set to "tickets".
func Env(vars map[string]string) func(string) string {
	return func(k string) string {
		if k == "TABLE_NAME" {
			return "tickets"
		}
		return vars[k]
	}
}
