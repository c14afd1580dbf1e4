package testenv

import "syscall"

// sysProcAttr makes the kernel kill a started service when the test binary
// dies, so a binary without testenv.Main (or one that crashes) leaks nothing.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
