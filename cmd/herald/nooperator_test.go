package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A herald built with -tags nooperator links no Kubernetes client library — their package initialisation
// alone costs every process about 28 MB of RSS (docs/benchmarks.md) — and its operator command says how
// it was built instead of starting.
func TestNoOperatorBuildLinksNoKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds herald")
	}
	out, err := exec.Command("go", "list", "-deps", "-tags", "nooperator", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "k8s.io/") || strings.HasPrefix(pkg, "sigs.k8s.io/") {
			t.Errorf("the nooperator build links %s", pkg)
		}
	}
	bin := filepath.Join(t.TempDir(), "herald")
	if out, err := exec.Command("go", "build", "-tags", "nooperator", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nooperator: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "operator").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "built without the operator") {
		t.Errorf("herald operator in the nooperator build: %v %s", err, out)
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "herald ") {
		t.Errorf("herald version in the nooperator build: %v %s", err, out)
	}
}
