package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aivax-examples/idempotent-callback/internal/metrics"
	"github.com/aivax-examples/idempotent-callback/internal/testkit/emftest"
)

// checkEMFLines: in the deployed binary's output, every callback line is
// also its metrics (valid EMF counting one callback) and carries the
// invocation's requestId; no other line carries metrics.
func checkEMFLines(t *testing.T, out string, invocations int) {
	t.Helper()
	counted := 0
	for _, line := range strings.Split(out, "\n") {
		data, err := emftest.Parse([]byte(line))
		if err != nil {
			continue // not JSON: the emulator's own lines
		}
		var l struct {
			Message   string `json:"message"`
			RequestID string `json:"requestId"`
		}
		_ = json.Unmarshal([]byte(line), &l)
		total := emftest.Sum(data)[metrics.Callbacks+"{}"]
		switch {
		case l.Message == "callback" && total == 1:
			counted++
			if l.RequestID == "" {
				t.Errorf("callback line without requestId: %s", line)
			}
		case l.Message == "callback":
			t.Errorf("callback line counts %v callbacks, want 1: %s", total, line)
		case len(data) > 0:
			t.Errorf("a line other than a callback's carries metrics: %s", line)
		}
	}
	if counted != invocations {
		t.Errorf("%d callback lines carry their metrics, for %d invocations", counted, invocations)
	}
}
