package server

import (
	"os"
	"runtime/debug"
)

// TuneGC makes garbage collection less frequent unless GOGC is set; `herald webhook` calls it. The webhook
// keeps little live memory but allocates per update, so the collector's CPU is what it saves; GOMEMLIMIT,
// which the chart sets from the container's memory limit, still bounds the heap. GOGC=400 was chosen on the
// ingress, when the default's collections cost it capacity and set its p99. The ingress no longer calls it:
// since its allocations per send were cut, the default costs it no measurable capacity, and at 400 its heap
// grew to several times what it keeps live, past the RSS target (docs/benchmarks.md, "Less garbage, the
// default GOGC", and "With the admission bounds", GC settings).
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}
