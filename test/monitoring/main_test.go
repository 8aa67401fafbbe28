package monitoring

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/heraldhq/herald/internal/testing/kubetest"
	"github.com/heraldhq/herald/internal/testing/reporoot"
)

// The envtest API server the operator runs against, and an uncached client of it.
var (
	restConfig *rest.Config
	k8s        client.Client
)

func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, func(cfg *rest.Config, c client.Client) { restConfig, k8s = cfg, c }))
}

// repoRoot is the directory of go.mod.
var repoRoot = reporoot.Dir

// The files under test: what the chart ships.
func dashboardPath(t testing.TB) string {
	return filepath.Join(repoRoot(t), "charts", "herald", "files", "dashboards", "herald.json")
}
func rulesPath(t testing.TB) string {
	return filepath.Join(repoRoot(t), "charts", "herald", "files", "rules", "herald-rules.yaml")
}
func operationsPath(t testing.TB) string { return filepath.Join(repoRoot(t), "docs", "operations.md") }

// promtool runs promtool with args in dir and returns its combined output. A missing promtool fails the test:
// the dashboard and the rules are not checked without it.
func promtool(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not on PATH: install it with `apt-get install prometheus` (Debian's package ships " +
			"promtool; .ci/run installs it), or put a promtool binary on PATH")
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// ruleFile is a Prometheus rules file, as far as these tests read it.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Record      string            `json:"record"`
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func readRules(t testing.TB, path string) ruleFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

func (f ruleFile) rules() []rule {
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// metricNames are the metric names an expression selects (every vector selector's name).
func metricNames(t testing.TB, expr string) []string {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	if err != nil {
		t.Fatalf("%v\n%s", err, expr)
	}
	seen := map[string]bool{}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			if name == "" {
				t.Errorf("a selector without a metric name in %s", expr)
			}
			seen[name] = true
		}
		return nil
	})
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// grafanaVariable matches $name and ${name} (and ${name:format}) in a Grafana query.
var grafanaVariable = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)`)

// substitute replaces the Grafana variables of expr with values; a variable without one is an error.
func substitute(expr string, values map[string]string) (string, error) {
	var missing []string
	out := grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVariable.FindStringSubmatch(v)
		name := m[1] + m[2]
		val, ok := values[name]
		if !ok {
			missing = append(missing, name)
			return v
		}
		return val
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown variables %s in %s", strings.Join(missing, ", "), expr)
	}
	return out, nil
}
