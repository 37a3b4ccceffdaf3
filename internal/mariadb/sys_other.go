//go:build !linux

package mariadb

import "syscall"

// procAttr returns no attributes: only Linux can tie a child's life to its
// parent's.
func procAttr() *syscall.SysProcAttr {
	return nil
}
