//go:build !linux

package localcluster

import "syscall"

// nodeProcAttr returns no attributes: only Linux can tie a child's life to
// its parent's.
func nodeProcAttr() *syscall.SysProcAttr {
	return nil
}
