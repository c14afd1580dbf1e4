package testenv

import (
	"runtime"
	"testing"
)

// endRecorder is a testing.TB that records whether missing failed or
// skipped it; Fatal and Skip end the calling goroutine, as testing's do.
type endRecorder struct {
	testing.TB
	failed, skipped bool
}

func (r *endRecorder) Helper()      {}
func (r *endRecorder) Fatal(...any) { r.failed = true; runtime.Goexit() }
func (r *endRecorder) Skip(...any)  { r.skipped = true; runtime.Goexit() }

// A missing tool skips a test on a developer's machine and fails it under
// CI=true, where scripts/tools.sh has installed every tool: a test that
// needs DynamoDB Local, aws-lambda-rie or node cannot pass in CI by
// skipping.
func TestMissingToolFailsUnderCI(t *testing.T) {
	for _, c := range []struct {
		ci                      string
		wantFailed, wantSkipped bool
	}{
		{"true", true, false},
		{"", false, true},
	} {
		t.Setenv("CI", c.ci)
		r := &endRecorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			missing(r, "a tool is not installed")
		}()
		<-done
		if r.failed != c.wantFailed || r.skipped != c.wantSkipped {
			t.Errorf("CI=%q: failed %v, skipped %v; want failed %v, skipped %v", c.ci, r.failed, r.skipped, c.wantFailed, c.wantSkipped)
		}
	}
}
