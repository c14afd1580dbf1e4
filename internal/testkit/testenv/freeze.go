//go:build linux

package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Bootstrap is the process id of the function the emulator runs: its
// child named bootstrap. The emulator starts it at its first invocation
// (and again after a reset), so Bootstrap waits up to 10 s for it.
func (r *Runtime) Bootstrap(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid := childNamed(r.PID, "bootstrap"); pid != 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("aws-lambda-rie (pid %d) has no bootstrap child:\n%s", r.PID, r.Out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Freeze stops the bootstrap (SIGSTOP) and returns once the kernel shows
// it stopped: from then on none of its goroutines runs, as in a Lambda
// execution environment frozen after its handler returned. It returns the
// bootstrap's pid, for Thaw.
func (r *Runtime) Freeze(t testing.TB) int {
	t.Helper()
	pid := r.Bootstrap(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP bootstrap (pid %d): %v", pid, err)
	}
	awaitState(t, pid, true)
	return pid
}

// Thaw resumes the bootstrap Freeze stopped (SIGCONT) and returns once it
// runs again, as Lambda thaws an environment for its next invocation.
func (r *Runtime) Thaw(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT bootstrap (pid %d): %v", pid, err)
	}
	awaitState(t, pid, false)
}

// awaitState waits up to 5 s until pid is stopped (state T) or not.
func awaitState(t testing.TB, pid int, stopped bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		state, _, ok := procStat(pid)
		if !ok {
			t.Fatalf("bootstrap (pid %d) is gone", pid)
		}
		if (state == 'T') == stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bootstrap (pid %d) in state %c after 5 s, want stopped=%v", pid, state, stopped)
		}
	}
}

// childNamed is the pid of a child of parent whose command is name, or 0.
func childNamed(parent int, name string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(pid); ok && ppid == parent {
			if comm, err := os.ReadFile(filepath.Join(d, "comm")); err == nil && string(bytes.TrimSpace(comm)) == name {
				return pid
			}
		}
	}
	return 0
}

// procStat reads a process's state and parent from /proc/<pid>/stat
// ("pid (comm) state ppid …"; comm may hold spaces and parentheses, so
// the fields are read after its last ')').
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(f[1]))
	return f[0][0], ppid, err == nil
}
