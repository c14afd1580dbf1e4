// Package jsonlines reads JSON-lines output (structured logs, a CLI's
// answers) back as objects for tests to assert on.
package jsonlines

import (
	"encoding/json"
	"strings"
	"testing"
)

// Decode is each line of s as a JSON object; a line that is not one fails
// the test, quoted. An empty s is no lines.
func Decode(t testing.TB, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(s) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		out = append(out, m)
	}
	return out
}
