package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderNotes renders the chart's NOTES.txt with the default values and sets. `helm template` leaves the
// notes out and `helm install --dry-run` needs a cluster, so a copy of the chart carries them as a
// ConfigMap's data, through the same template engine.
func renderNotes(t *testing.T, sets ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "herald")
	if err := os.CopyFS(dir, os.DirFS(chartDir(t))); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"_notes_under_test.tpl": `{{- define "notesUnderTest" -}}` + string(notes) + `{{- end }}`,
		"notes-under-test.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ include \"notesUnderTest\" . | toJson }}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, "templates", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "templates", "NOTES.txt")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helmBinary(t), append(templateArgs(valueSets[0], sets...), "--show-only", "templates/notes-under-test.yaml")...)
	cmd.Dir = dir
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp, "HELM_CONFIG_HOME="+tmp, "HELM_DATA_HOME="+tmp)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rendering the notes with %v: %v", sets, err)
	}
	objs := objects(t, string(out))
	if len(objs) != 1 {
		t.Fatalf("rendering the notes: %d objects, want the one ConfigMap", len(objs))
	}
	s, _, _ := unstructured.NestedString(objs[0].Object, "data", "notes")
	return s
}

// Behind the chart's Kubernetes Ingress, every client reaches the tenant API through the ingress
// controller: without a trusted proxy they share its address for the failed-authentication throttle. The
// install notes say so, and stay quiet once a trusted proxy is set or without the Ingress.
func TestNotesWarnOfAnIngressWithoutATrustedProxy(t *testing.T) {
	const warning = "kubernetesIngress is enabled and ingress.trustedProxies is empty"
	for _, tc := range []struct {
		name string
		sets []string
		warn bool
	}{
		{"no Ingress", nil, false},
		{"an Ingress without a trusted proxy", []string{"kubernetesIngress.enabled=true"}, true},
		{"an Ingress with a trusted proxy", []string{"kubernetesIngress.enabled=true", "ingress.trustedProxies={10.0.0.0/8}"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes := renderNotes(t, tc.sets...)
			if !strings.Contains(notes, "is installed as") {
				t.Fatalf("the rendered notes are not the chart's:\n%s", notes)
			}
			if got := strings.Contains(notes, warning); got != tc.warn {
				t.Errorf("the notes warn %v, want %v:\n%s", got, tc.warn, notes)
			}
		})
	}
}
