// Package reporoot finds the repository's root for tests that read its files (the chart, the dashboard and
// the rules, the RBAC manifests, the CRDs).
package reporoot

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Dir is the directory of go.mod above the working directory (a test's package directory); the test fails
// when there is none.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Find is Dir for a TestMain, which has no test to fail.
func Find() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
