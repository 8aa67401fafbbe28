package server

import (
	"os"
	"runtime/debug"
)

// TuneGC makes garbage collection less frequent unless GOGC is set. Herald's HTTP components keep little
// live memory but allocate per request; at the default GOGC=100 collection took about 15 % of the ingress's
// CPU at 3,000 sends/s and set its p99. GOGC=400 halves the tail (docs/benchmarks.md); GOMEMLIMIT, which
// the chart sets from the container's memory limit, still bounds the heap.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
