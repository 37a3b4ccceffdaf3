package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// readerGone returns a check of whether the reading end of w, when w is a
// pipe, has been closed (poll reports POLLERR on a pipe's write end once
// no reader is left), so that an idle capture notices `| head` ending;
// for anything else the check always says no.
func readerGone(w io.Writer) func() bool {
	f, ok := w.(*os.File)
	if !ok {
		return func() bool { return false }
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return func() bool { return false }
	}
	fd := int32(f.Fd())
	return func() bool {
		fds := []unix.PollFd{{Fd: fd}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
	}
}

// growPipe asks for a 1 MiB pipe buffer when w is a pipe (Linux allows it
// to unprivileged processes by default: fs.pipe-max-size), so that a
// reader that takes big gulps keeps capture's writer busy; the default
// 64 KiB made capture block in write for most of a catch-up.
func growPipe(w io.Writer) {
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, 1<<20) // best effort
		}
	}
}
