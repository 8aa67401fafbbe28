package benchutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every architecture Go
// supports there (the kernel fixes what it reports to user space, whatever its internal HZ).
const clockTicks = 100

// CPUTime returns the CPU time pid has used so far, user and system, all its threads. Sampled before and
// after a phase it gives what the phase cost the process — a measure a shared, busy machine disturbs far
// less than throughput, which other processes' load moves (../shared/benchmarking.md).
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count fields after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// After the name: state is field 3, utime field 14 and stime field 15 (proc(5)).
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat utime: %w", pid, err)
	}
	stime, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat stime: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}
