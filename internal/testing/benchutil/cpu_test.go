package benchutil

import (
	"os"
	"os/exec"
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

func TestTreeCPUTimeCountsAChildThatEnded(t *testing.T) {
	before, err := TreeCPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A child that spins for 300 ms and is waited for: its time is the reaped part of ours.
	cmd := exec.Command("sh", "-c", `end=$(( $(date +%s%N) + 300000000 )); while [ $(date +%s%N) -lt $end ]; do :; done`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	after, err := TreeCPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	own, err := CPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 50*time.Millisecond {
		t.Fatalf("a child's 300 ms spin added %v to the tree (own %v)", d, own)
	}
}
