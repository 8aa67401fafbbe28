package chart

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden from the current chart")

// generated matches the values the chart generates at random when none is given (webhook secret, phone-hash
// key, callback secret key, bot token key, the salt of checksum/secrets, and so the checksum): the golden files hold a
// placeholder instead. TestChecksumAnnotationDoesNotConfirmGuessesOfSecretValues checks the checksum itself.
var generated = regexp.MustCompile(`(?m)^(  (?:webhook-secret|phone-hash-key): )[A-Za-z0-9+/=]{64}$|^(  checksum-salt: )[A-Za-z0-9+/=]{44}$|^(        checksum/secrets: )[0-9a-f]{64}$|^(  (?:callback-secret-key|bot-token-key): )[A-Za-z0-9+/=]{60}$`)

func TestHelmTemplateMatchesGoldenFiles(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			got := stubMonitoringFiles(stubCRDs(generated.ReplaceAllString(render(t, vs), "${1}${2}${3}${4}GENERATED")))
			path := filepath.Join("testdata", "golden", vs.name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./test/chart/ -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("helm template with %s differs from %s (run go test ./test/chart/ -update if the change is intended):\n%s",
					vs.name, path, lineDiff(string(want), got))
			}
		})
	}
}

var crdHeader = regexp.MustCompile(`(?s)^(# Source: [^\n]*\n).*?\nkind: CustomResourceDefinition\nmetadata:\n  annotations:\n(.*?)  name: ([^\n]*)\n`)

// stubCRDs replaces each CRD's body with its name and annotations: the body is config/crd/bases' (checked
// by TestChartCRDsAreConfigCRDs), and regenerating the CRDs should not churn the golden files.
func stubCRDs(manifest string) string {
	docs := strings.Split(manifest, "---\n")
	for i, d := range docs {
		if m := crdHeader.FindStringSubmatch(d); m != nil {
			stub := m[1] + "# CustomResourceDefinition " + m[3] + ", body as in config/crd/bases\n"
			for _, line := range strings.Split(m[2], "\n") {
				if strings.HasPrefix(line, "    helm.sh/") {
					stub += "#   annotation " + strings.TrimSpace(line) + "\n"
				}
			}
			docs[i] = stub
		}
	}
	return strings.Join(docs, "---\n")
}

// stubMonitoringFiles replaces the dashboard's JSON and the rules in their objects with a line naming the
// file: the objects hold the files as they are (TestDashboardConfigMapHoldsTheFile,
// TestPrometheusRuleHoldsTheRulesFile), and editing the dashboard or the rules should not churn the golden
// files.
func stubMonitoringFiles(manifest string) string {
	docs := strings.Split(manifest, "---\n")
	for i, d := range docs {
		switch {
		case strings.HasPrefix(d, "# Source: herald/templates/dashboards.yaml\n"):
			if at := strings.Index(d, "  herald.json: |-\n"); at >= 0 {
				docs[i] = d[:at] + "  herald.json: |-\n    # files/dashboards/herald.json\n"
			}
		case strings.HasPrefix(d, "# Source: herald/templates/prometheusrule.yaml\n"):
			if at := strings.Index(d, "\nspec:\n"); at >= 0 {
				docs[i] = d[:at] + "\nspec:\n  # files/rules/herald-rules.yaml\n"
			}
		}
	}
	return strings.Join(docs, "---\n")
}

// lineDiff shows the first lines that differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl == gl {
			continue
		}
		fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
		if shown++; shown == 10 {
			b.WriteString("…\n")
			break
		}
	}
	return b.String()
}
