package benchutil

import (
	"context"
	"fmt"
	"github.com/jackc/pgx/v5"
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
	st, err := readStat(pid)
	return st.own, err
}

// TreeCPUTime returns the CPU time of pid and of its children, those running and those it has reaped: for
// a PostgreSQL postmaster, the whole cluster's (each connection is a child process; one that has ended was
// waited for, and its time added to the postmaster's children's times).
func TreeCPUTime(pid int) (time.Duration, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	total := st.own + st.reaped
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		c, err := readStat(child)
		if err != nil || c.ppid != pid {
			continue // gone meanwhile, or not a child
		}
		total += c.own + c.reaped
	}
	return total, nil
}

type procStat struct {
	ppid        int
	own, reaped time.Duration
}

// readStat reads pid's parent and CPU times from /proc/<pid>/stat (proc(5)).
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count fields after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// After the name: state is field 3, ppid field 4, utime 14, stime 15, cutime 16 and cstime 17.
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	n := make([]int64, 0, 5)
	for _, k := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat field %d: %w", pid, k+3, err)
		}
		n = append(n, v)
	}
	ticks := func(t int64) time.Duration { return time.Duration(t) * time.Second / clockTicks }
	return procStat{ppid: int(n[0]), own: ticks(n[1] + n[2]), reaped: ticks(n[3] + n[4])}, nil
}

// PostmasterPID returns the process id of the PostgreSQL server behind url: the parent of a connection's
// backend (the benchmarks' clusters run on this machine).
func PostmasterPID(ctx context.Context, url string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("postmaster: %w", err)
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0, fmt.Errorf("postmaster: %w", err)
	}
	st, err := readStat(backend)
	if err != nil {
		return 0, fmt.Errorf("postmaster: the backend's parent: %w", err)
	}
	return st.ppid, nil
}
