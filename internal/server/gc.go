package server

import (
	"os"
	"runtime/debug"
)

// TuneGC makes garbage collection less frequent unless GOGC is set; `herald webhook` calls it. The webhook
// keeps little live memory but allocates per update. GOGC=400 was chosen on the ingress, where the default
// GOGC=100 then took about 15 % of its CPU at 3,000 sends/s and set its p99; GOMEMLIMIT, which the chart
// sets from the container's memory limit, still bounds the heap. The ingress no longer calls it: since its
// allocations per send were cut, the default costs it no measurable capacity, and at 400 its heap grew to
// five times what it keeps live, past the RSS target (docs/benchmarks.md).
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
