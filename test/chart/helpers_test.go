package chart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/testing/reporoot"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	releaseName      = "herald"
	releaseNamespace = "herald"
	// kubeVersion is the cluster version helm renders for: the envtest kube-apiserver's (hack/tools/go.mod).
	// Passed explicitly because a helm built with `go install` assumes Kubernetes 1.20.
	kubeVersion = "1.37.1"
)

// valueSet is one way of installing the chart; file is relative to charts/herald, empty for the defaults.
type valueSet struct {
	name string
	file string
}

// requiredSets are the settings the chart refuses to render without; the "defaults" value set is the
// defaults plus these.
var requiredSets = []string{
	"secrets.databaseURL.value=postgres://herald:secret@postgresql:5432/herald?sslmode=disable",
	"secrets.kafkaBrokers.value=kafka:9092",
	"secrets.botToken.value=123456:TEST-token",
}

// valueSets are the installs every test renders: the defaults (with requiredSets) and each file in
// charts/herald/ci.
var valueSets = []valueSet{
	{"defaults", ""},
	{"keda", "ci/keda-values.yaml"},
	{"existing-secrets", "ci/existing-secrets-values.yaml"},
	{"minimal", "ci/minimal-values.yaml"},
	{"full", "ci/full-values.yaml"},
}

// scratchDir lives as long as the test binary: files shared by several tests (the herald binary) go there.
var scratchDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "herald-chart-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratchDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the directory of go.mod.
var repoRoot = reporoot.Dir

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "herald") }

// helmBinary is $HELM, else ./bin/helm. A missing helm fails the test: the chart is not checked without it.
func helmBinary(t testing.TB) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		if _, err := exec.LookPath(h); err != nil {
			t.Fatalf("HELM=%s is not an executable: %v", h, err)
		}
		return h
	}
	local := filepath.Join(repoRoot(t), "bin", "helm")
	if _, err := os.Stat(local); err == nil {
		return local
	}
	t.Fatal("helm not found: set HELM=<path> (make test does) or install it into ./bin (make tools)")
	return ""
}

// helm runs helm in the chart directory and returns stdout; stderr goes into the error.
func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Dir = chartDir(t)
	// Keep helm away from the user's repositories and caches.
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp, "HELM_CONFIG_HOME="+tmp, "HELM_DATA_HOME="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// templateArgs are the arguments of `helm template` for a value set plus extra --set flags.
func templateArgs(vs valueSet, sets ...string) []string {
	args := []string{"template", releaseName, ".", "--namespace", releaseNamespace, "--kube-version", kubeVersion}
	if vs.file != "" {
		args = append(args, "--values", vs.file)
	} else {
		sets = append(append([]string{}, requiredSets...), sets...)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// render runs `helm template` for a value set and fails the test on error.
func render(t testing.TB, vs valueSet, sets ...string) string {
	t.Helper()
	out, err := helm(t, templateArgs(vs, sets...)...)
	if err != nil {
		t.Fatalf("rendering %s: %v", vs.name, err)
	}
	return out
}

// objects splits a rendered manifest into its objects, skipping empty documents.
func objects(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading rendered YAML: %v", err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("rendered document is not YAML: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// find returns the object of a kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// ofKind returns the objects of a kind.
func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// podSpec returns the pod template spec of a Deployment or Job.
func podSpec(t testing.TB, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, found, err := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if err != nil || !found {
		t.Fatalf("%s %s has no pod template: %v", o.GetKind(), o.GetName(), err)
	}
	return spec
}

// containers returns the containers of a pod spec.
func containers(t testing.TB, spec map[string]any) []map[string]any {
	t.Helper()
	list, _ := spec["containers"].([]any)
	var out []map[string]any
	for _, c := range list {
		out = append(out, c.(map[string]any))
	}
	if len(out) == 0 {
		t.Fatal("pod spec has no containers")
	}
	return out
}

func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// envNames returns the names of a container's environment variables.
func envNames(c map[string]any) []string {
	list, _ := c["env"].([]any)
	var out []string
	for _, e := range list {
		out = append(out, fmt.Sprint(e.(map[string]any)["name"]))
	}
	return out
}

// envVar returns a container's variable by name, or nil.
func envVar(c map[string]any, name string) map[string]any {
	list, _ := c["env"].([]any)
	for _, e := range list {
		if m := e.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}
