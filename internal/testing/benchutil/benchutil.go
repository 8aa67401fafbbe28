// Package benchutil holds what Herald's benchmark programs (hack/bench/*) share: private PostgreSQL
// clusters with the schema, the components they run in process (harness.go), the HTTP load generator
// (load.go), latency summaries, and process RSS readings. The data a benchmark seeds comes from
// internal/testing/fixture.
package benchutil

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Latencies summarises a set of durations.
type Latencies []time.Duration

// Percentile returns the p-th percentile (0..100).
func (l Latencies) Percentile(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := append(Latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// String renders p50/p90/p99/max in milliseconds.
func (l Latencies) String() string {
	return fmt.Sprintf("p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms",
		ms(l.Percentile(50)), ms(l.Percentile(90)), ms(l.Percentile(99)), ms(l.Percentile(100)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ProcMemory is a process's memory as /proc/PID/status tells it, in bytes: resident now (RSS) and at
// its highest (Peak), and of the resident, what is anonymous and what is pages of files (the binary's).
type ProcMemory struct{ RSS, Peak, Anon, File int64 }

// Memory reads pid's ProcMemory.
func Memory(pid int) (ProcMemory, error) {
	var m ProcMemory
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return m, err
	}
	fields := map[string]*int64{"VmRSS:": &m.RSS, "VmHWM:": &m.Peak, "RssAnon:": &m.Anon, "RssFile:": &m.File}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || fields[f[0]] == nil {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		*fields[f[0]] = kb << 10
	}
	return m, nil
}

// RSS returns pid's resident set size now and at its peak (VmHWM), in bytes.
func RSS(pid int) (current, peak int64, err error) {
	m, err := Memory(pid)
	return m.RSS, m.Peak, err
}

// Machine describes where a benchmark ran.
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				model = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s/%s, %s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// Main runs a benchmark on a private, durable PostgreSQL (Postgres): it prints the report's first line (the
// machine), starts the cluster, runs run with the database's URL and stops the cluster; when either failed
// it says why on stderr, as "name: error", and exits 1.
func Main(name string, run func(ctx context.Context, dbURL string) error) {
	ctx := context.Background()
	fmt.Fprintln(os.Stdout, "machine:", Machine())
	err := func() error {
		url, stop, err := Postgres(ctx)
		if err != nil {
			return err
		}
		defer stop()
		return run(ctx, url)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Median is the median of f over xs (the upper one of an even count).
func Median[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}
