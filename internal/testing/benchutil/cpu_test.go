package benchutil

import (
	"os"
	"testing"
	"time"
)

func TestCPUTimeCountsWhatTheProcessSpends(t *testing.T) {
	before, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin for 300 ms of wall time on this goroutine: at least a good part of it is this process's CPU.
	x := 0
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		x++
	}
	after, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 50*time.Millisecond || d > 10*time.Second {
		t.Fatalf("a 300 ms spin counted %v of CPU (x=%d)", d, x)
	}
	if _, err := CPUTime(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
