package chaos

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// The results of every scenario run by this test binary, for the table Main prints.
var report struct {
	mu      sync.Mutex
	results []Result
}

func record(r Result) {
	report.mu.Lock()
	report.results = append(report.results, r)
	report.mu.Unlock()
}

// tableHeader names the columns of the results table.
var tableHeader = []string{"scenario", "accepted", "delivered", "lost", "duplicates", "out-of-order",
	"pacing violations", "global violations (ours/sim)", "max recovery (202/delivery)",
	"answers during fault (202/502/503/other)", "slowest answer", "orphans", "pending", "result"}

// WriteTable writes results as a Markdown table.
func WriteTable(w io.Writer, results []Result) error {
	var b strings.Builder
	row := func(cells []string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	row(tableHeader)
	sep := make([]string, len(tableHeader))
	for i := range sep {
		sep[i] = "---"
	}
	row(sep)
	for _, r := range results {
		verdict := "pass"
		if len(r.Failures) > 0 {
			verdict = "FAIL"
		}
		row([]string{
			strings.TrimPrefix(r.Scenario, "Test"),
			fmt.Sprint(r.Accepted), fmt.Sprint(r.Delivered), fmt.Sprint(r.Lost), fmt.Sprint(r.Duplicates),
			fmt.Sprint(r.OutOfOrder), fmt.Sprint(r.PacingViolations),
			fmt.Sprintf("%d/%d", r.GlobalViolations, r.SimViolations),
			fmtDuration(r.Recovery202) + "/" + fmtDuration(r.RecoveryDelivery),
			r.During.String(), fmtLatency(r.MaxLatency), fmt.Sprint(r.Orphans), fmt.Sprint(r.Pending), verdict,
		})
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeReport prints the table of this run's results and writes it to $HERALD_CHAOS_REPORT when set.
func writeReport() error {
	report.mu.Lock()
	results := append([]Result(nil), report.results...)
	report.mu.Unlock()
	if len(results) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nFault-injection results (mode %s):\n\n", CurrentMode().Name)
	_ = WriteTable(&b, results)
	fmt.Print(b.String())
	if path := os.Getenv("HERALD_CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("while writing HERALD_CHAOS_REPORT: %w", err)
		}
	}
	return nil
}

// fmtLatency shows short latencies in milliseconds, long ones in seconds.
func fmtLatency(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmtDuration(d)
}
