package chart

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shBlock returns the first ```sh block after a heading of a Markdown file in the repository.
func shBlock(t *testing.T, doc, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), doc))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no heading %q", doc, heading)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	if start < 0 {
		t.Fatalf("%s: no ```sh block after %q", doc, heading)
	}
	s = s[start+len("```sh\n"):]
	block, _, _ := strings.Cut(s, "```")
	return block
}

// runDocumented runs a documented shell block in a scratch directory holding charts/herald, with `helm
// install` turned into `helm template` for the tests' Kubernetes version (no cluster) and the kubectl
// lines left out; it returns the rendered objects' Secret data of the chart-made Secret.
func runDocumented(t *testing.T, block string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(chartDir(t), filepath.Join(dir, "charts", "herald")); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "kubectl ") {
			continue
		}
		if strings.HasPrefix(l, "helm install ") {
			if !strings.Contains(block, "--create-namespace") && !strings.Contains(l, "--namespace") {
				t.Fatalf("the documented install has no namespace: %s", l)
			}
			l = `"$HELM" template --kube-version ` + kubeVersion + " " + strings.TrimPrefix(l, "helm install ")
			l = strings.Replace(l, " --wait", "", 1)
		}
		lines = append(lines, l)
	}
	script := strings.Join(lines, "\n")
	if !strings.Contains(script, `"$HELM" template`) {
		t.Fatalf("the block runs no helm install:\n%s", block)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM="+helmBinary(t), "HELM_CACHE_HOME="+tmp, "HELM_CONFIG_HOME="+tmp, "HELM_DATA_HOME="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the documented commands fail: %v\n%s\nscript:\n%s", err, out, script)
	}
	data := map[string]string{}
	for _, o := range ofKind(objects(t, string(out)), "Secret") {
		if o.GetName() != releaseName {
			continue
		}
		m, _ := o.Object["data"].(map[string]any)
		for k, v := range m {
			d, err := base64.StdEncoding.DecodeString(v.(string))
			if err != nil {
				t.Fatalf("Secret %s key %s: %v", o.GetName(), k, err)
			}
			data[k] = string(d)
		}
	}
	return data
}

// The chart README's Quick start, pasted as written, installs a chart whose brokers are the two given
// (helm's --set splits an unescaped comma into a list, which the schema refuses).
func TestTheChartQuickStartWorksAsWritten(t *testing.T) {
	data := runDocumented(t, shBlock(t, "charts/herald/README.md", "## Quick start"))
	if got, want := data["kafka-brokers"], "kafka-0.kafka.data:9092,kafka-1.kafka.data:9092"; got != want {
		t.Errorf("kafka-brokers %q, want %q", got, want)
	}
	if !strings.HasPrefix(data["database-url"], "postgres://") || !strings.HasSuffix(data["database-url"], "?sslmode=require") {
		t.Errorf("database-url %q", data["database-url"])
	}
	if data["messenger-bot-token"] == "" {
		t.Error("no bot token in the chart-made Secret")
	}
}

// docs/install.md's install (a values file over existing Secrets) renders as written.
func TestTheInstallDocsValuesRender(t *testing.T) {
	runDocumented(t, shBlock(t, "docs/install.md", "## 3. Install"))
}

// A chart installed without the database URL, the brokers or the bot token fails at render, saying what to
// set: the components would exit at start, and `helm install --wait` never reaches the notes.
func TestTheRequiredSettingsFailTheRender(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want []string
	}{
		{"none", nil, []string{"secrets.databaseURL.value", "secrets.kafkaBrokers.value", "secrets.botToken.value"}},
		{"no brokers", []string{"secrets.databaseURL.value=postgres://x", "secrets.botToken.value=1:x"}, []string{"secrets.kafkaBrokers.value or secrets.kafkaBrokers.existingSecret.name (HERALD_KAFKA_BROKERS)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", releaseName, ".", "--namespace", releaseNamespace, "--kube-version", kubeVersion}
			for _, s := range tc.sets {
				args = append(args, "--set", s)
			}
			_, err := helm(t, args...)
			if err == nil {
				t.Fatalf("helm template with %v renders", tc.sets)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
			if _, msg, _ := strings.Cut(err.Error(), "Error:"); len(tc.sets) > 0 && strings.Contains(msg, "secrets.databaseURL") {
				t.Errorf("the error names a setting that is set:\n%v", err)
			}
		})
	}
}
