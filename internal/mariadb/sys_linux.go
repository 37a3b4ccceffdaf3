package mariadb

import "syscall"

// procAttr makes the server die with the process that started it, so a braid
// or test binary that is killed leaves no server behind. (The signal is tied
// to the thread that started the server; the Go runtime does not end threads
// that have not been locked, so this holds in practice.)
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
