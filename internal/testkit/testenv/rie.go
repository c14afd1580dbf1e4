//go:build linux

package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StartRIE starts aws-lambda-rie (see RIE) with bootstrap on free loopback
// ports and waits until it listens. The environment is built from scratch,
// so no credentials, profile or region of the machine leak into the
// function: dummy credentials, us-east-1, JSON logs, plus vars. The
// emulator runs in its own process group; stop (also run at Cleanup) ends
// it and the bootstrap. It returns the invoke URL and the emulator's
// combined stdout and stderr, where the REPORT lines and the function's
// own output appear.
func StartRIE(t testing.TB, bootstrap string, vars map[string]string) (invokeURL string, out *Buffer, stop func()) {
	t.Helper()
	r := StartRuntime(t, bootstrap, vars)
	return r.URL, r.Out, r.Stop
}

// Runtime is an emulator StartRuntime started, with its function.
type Runtime struct {
	URL  string  // the invoke URL
	Out  *Buffer // the emulator's and the function's combined output
	Stop func()  // ends the emulator and the bootstrap (also run at Cleanup)
	// PID is the emulator's process id; the bootstrap is its child
	// (Bootstrap).
	PID int
}

// StartRuntime is StartRIE, keeping the emulator's process id for a test
// that stops and resumes the bootstrap (Runtime.Freeze, Runtime.Thaw).
func StartRuntime(t testing.TB, bootstrap string, vars map[string]string) *Runtime {
	t.Helper()
	// FreePort's port is free when it returns, not when the emulator binds
	// it: under a parallel test run another process can take it first. The
	// emulator then exits at start saying so, and the ports are picked
	// again.
	for attempt := 1; ; attempt++ {
		r, ok := startRIEOnce(t, bootstrap, vars)
		if ok {
			return r
		}
		if attempt == 3 || !strings.Contains(r.Out.String(), "address already in use") {
			t.Fatalf("aws-lambda-rie exited at start:\n%s", r.Out)
		}
	}
}

// startRIEOnce is one attempt of StartRuntime; ok is false when the
// emulator exited before it listened.
func startRIEOnce(t testing.TB, bootstrap string, vars map[string]string) (*Runtime, bool) {
	t.Helper()
	rie := RIE(t)
	emulator := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	runtimeAPI := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	home := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"AWS_CONFIG_FILE=" + filepath.Join(home, "config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_LAMBDA_FUNCTION_NAME=CallbackFunction",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=10",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1769",
		"AWS_LAMBDA_LOG_FORMAT=JSON",
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	out := &Buffer{}
	cmd := exec.Command(rie, //nolint:gosec // the emulator built by scripts/tools.sh
		"--runtime-interface-emulator-address", emulator,
		"--runtime-api-address", runtimeAPI,
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", rie, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("aws-lambda-rie (pid %d) did not exit", cmd.Process.Pid)
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", emulator, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-done:
			return &Runtime{Out: out, Stop: stop, PID: cmd.Process.Pid}, false
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("aws-lambda-rie not listening on %s after 15s:\n%s", emulator, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &Runtime{URL: "http://" + emulator + "/2015-03-31/functions/function/invocations", Out: out, Stop: stop, PID: cmd.Process.Pid}, true
}
