package chart

import "testing"

func TestHelmLintPassesForEveryValueSet(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			args := []string{"lint", ".", "--strict", "--namespace", releaseNamespace, "--kube-version", kubeVersion}
			if vs.file != "" {
				args = append(args, "--values", vs.file)
			}
			if out, err := helm(t, args...); err != nil {
				t.Fatalf("helm lint failed:\n%v\n%s", err, out)
			}
		})
	}
}
