package benchutil

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestPostmasterPIDIsTheServersProcess(t *testing.T) {
	url := pgtest.NewDatabase(t)
	pid, err := PostmasterPID(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatalf("postmaster %d: %v", pid, err)
	}
	if !strings.Contains(string(cmdline), "postgres") {
		t.Fatalf("process %d is %q, not a PostgreSQL server", pid, cmdline)
	}
	// The cluster has used CPU since it started (initdb's template copy, the connections): the tree counts it.
	if d, err := TreeCPUTime(pid); err != nil || d <= 0 {
		t.Fatalf("the cluster's CPU: %v, %v", d, err)
	}
}
