package localcluster

import "syscall"

// nodeProcAttr makes a braid node die with the process that started it, so
// that a test, benchmark or demo that is killed leaves no node behind. (The
// signal is tied to the thread that started the node; the Go runtime does
// not end threads that have not been locked, so this holds in practice.)
func nodeProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
