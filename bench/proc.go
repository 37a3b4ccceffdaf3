package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc/PID/stat's CPU times: sysconf(_SC_CLK_TCK),
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// ProcCPU is the CPU time (user + system) process pid has used so far,
// from /proc/PID/stat, to a clock tick (10 ms).
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: cpu time: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// the fields after it start with field 3, the state.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseUint(f[14-3], 10, 64)
	stime, err2 := strconv.ParseUint(f[15-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("bench: /proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// ProcPeakRSS is the highest resident set size process pid has had, in
// bytes: VmHWM in /proc/PID/status.
func ProcPeakRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: peak rss: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("bench: /proc/%d/status: VmHWM:%s", pid, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc/%d/status: %w", pid, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("bench: /proc/%d/status: no VmHWM", pid)
}
