// Package reporoot finds the repository's root for tests that read its files (the chart, the dashboard and
// the rules, the RBAC manifests).
package reporoot

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir is the directory of go.mod above the working directory (a test's package directory); the test fails
// when there is none.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}
