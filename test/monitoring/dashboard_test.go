package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int                      `json:"id"`
	Type        string                   `json:"type"`
	Title       string                   `json:"title"`
	Description string                   `json:"description"`
	Datasource  *datasource              `json:"datasource"`
	GridPos     struct{ H, W, X, Y int } `json:"gridPos"`
	Panels      []panel                  `json:"panels"` // a collapsed row's
	Targets     []struct {
		Datasource *datasource `json:"datasource"`
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is one PromQL expression of the dashboard, with where it is.
type query struct {
	where string // panel title and refId
	expr  string // as written, with Grafana variables
}

func readDashboard(t testing.TB) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath(t))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardPath(t), err)
	}
	return d
}

// allPanels flattens rows.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

func (d dashboard) queries() []query {
	var out []query
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			out = append(out, query{where: fmt.Sprintf("panel %d %q, query %s", p.ID, p.Title, tg.RefID), expr: tg.Expr})
		}
	}
	return out
}

// concrete are the values the checks give the dashboard's variables: Grafana's own ($__rate_interval and
// the like) and the dashboard's (namespace, release), as Grafana would substitute them.
var concrete = map[string]string{
	"__rate_interval": "5m",
	"__interval":      "1m",
	"__range":         "1h",
	"namespace":       "herald",
	"release":         "herald",
}

// TestDashboardIsWellFormed: every panel but a row has a title, a description, queries, and reads the
// dashboard's data source variable; ids are unique; the grid is 24 wide; every variable a query uses is one
// the dashboard defines or one of Grafana's.
func TestDashboardIsWellFormed(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard needs a uid and a title (uid %q, title %q)", d.UID, d.Title)
	}
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	for _, v := range []string{"datasource", "namespace", "release"} {
		if !defined[v] {
			t.Errorf("the dashboard defines no variable %q", v)
		}
	}
	ids := map[int]string{}
	queries := 0
	for _, p := range d.allPanels() {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share the id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W < 1 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H < 1 {
			t.Errorf("panel %q lies outside the 24-column grid: %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d needs a title and a description (what it shows, which alert it relates to)", p.ID)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not read the ${datasource} variable: %+v", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: query %s is empty", p.Title, tg.RefID)
			}
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: query %s does not read the ${datasource} variable", p.Title, tg.RefID)
			}
			for _, m := range grafanaVariable.FindAllStringSubmatch(tg.Expr, -1) {
				name := m[1] + m[2]
				_, known := concrete[name]
				builtin := known && strings.HasPrefix(name, "__")
				if !defined[name] && !builtin {
					t.Errorf("panel %q: query %s uses $%s, which the dashboard does not define", p.Title, tg.RefID, name)
				}
			}
		}
	}
	if queries < 20 {
		t.Errorf("the dashboard has %d queries; the test read the wrong file or lost the panels", queries)
	}
}

// TestDashboardQueriesSelectOneRelease: every selector of every query is narrowed to the $namespace and to
// the pods of one component of the $release (pod=~"$release-<component>-.*"), so that a second release, or
// another application's metrics of the same name, never mix in.
func TestDashboardQueriesSelectOneRelease(t *testing.T) {
	vars := map[string]string{}
	for k, v := range concrete {
		vars[k] = v
	}
	vars["namespace"], vars["release"] = "NAMESPACE_VARIABLE", "RELEASE_VARIABLE"
	for _, q := range readDashboard(t).queries() {
		expr, err := substitute(q.expr, vars)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		e, err := parser.ParseExpr(expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			var ns, pod bool
			for _, m := range vs.LabelMatchers {
				ns = ns || (m.Name == "namespace" && m.Type == labels.MatchEqual && m.Value == "NAMESPACE_VARIABLE")
				pod = pod || (m.Name == "pod" && m.Type == labels.MatchRegexp && strings.HasPrefix(m.Value, "RELEASE_VARIABLE-"))
			}
			if !ns || !pod {
				t.Errorf("%s: %s is not narrowed to namespace=\"$namespace\" and pod=~\"$release-…\"", q.where, vs)
			}
			return nil
		})
	}
}

// TestDashboardQueriesPassPromtool: promtool checks PromQL only inside rules files, so every query, its
// variables given concrete values, becomes a recording rule of a generated file that `promtool check rules`
// must accept.
func TestDashboardQueriesPassPromtool(t *testing.T) {
	queries := readDashboard(t).queries()
	type recording struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []recording
	index := map[string]query{}
	for i, q := range queries {
		expr, err := substitute(q.expr, concrete)
		if err != nil {
			t.Fatalf("%s: %v", q.where, err)
		}
		name := fmt.Sprintf("herald_dashboard:query_%d", i)
		rules = append(rules, recording{Record: name, Expr: expr})
		index[name] = q
	}
	file := map[string]any{"groups": []any{map[string]any{"name": "herald-dashboard", "rules": rules}}}
	b, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard-rules.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := promtool(t, dir, "check", "rules", "dashboard-rules.yaml")
	if err != nil {
		var where strings.Builder
		for i := range queries {
			name := fmt.Sprintf("herald_dashboard:query_%d", i)
			fmt.Fprintf(&where, "  %s: %s\n", name, index[name].where)
		}
		t.Fatalf("promtool check rules refused the dashboard's queries: %v\n%s\nthe recording rules are:\n%s", err, out, where.String())
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(queries)); !strings.Contains(out, want) {
		t.Errorf("promtool did not report %q:\n%s", want, out)
	}
}

// TestTenantUsagePanelRanksTheTopTenants: the per-tenant usage panel's query, its variables given concrete
// values ($__range: an hour), evaluated by `promtool test rules` over an hour of ingress counters of twelve
// tenants, yields the ten that sent the most with what each sent in the hour — a tenant's pods summed — and
// nothing of requests, refusals, another namespace or another release.
func TestTenantUsagePanelRanksTheTopTenants(t *testing.T) {
	var expr string
	for _, q := range readDashboard(t).queries() {
		if strings.Contains(q.where, `"Usage: sends accepted in the time range, top 10 tenants"`) {
			expr = q.expr
		}
	}
	if expr == "" {
		t.Fatal("the dashboard has no panel \"Usage: sends accepted in the time range, top 10 tenants\"")
	}
	expr, err := substitute(expr, concrete)
	if err != nil {
		t.Fatal(err)
	}
	type series struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	counter := func(labels string, perMinute int) series {
		return series{`herald_ingress_tenant_units_total{` + labels + `}`, fmt.Sprintf("0+%dx60", perMinute)}
	}
	sel := func(pod, tenant, kind, outcome string) string {
		return fmt.Sprintf(`namespace="herald", pod=%q, tenant=%q, kind=%q, outcome=%q`, pod, tenant, kind, outcome)
	}
	var input []series
	var want []sample
	for i := 1; i <= 12; i++ {
		tenant := fmt.Sprintf("t%02d", i)
		if i == 12 { // two ingress pods: summed
			input = append(input, counter(sel("herald-ingress-a", tenant, "sends", "accepted"), 6),
				counter(sel("herald-ingress-b", tenant, "sends", "accepted"), 6))
		} else {
			input = append(input, counter(sel("herald-ingress-a", tenant, "sends", "accepted"), i))
		}
		if i >= 3 {
			want = append(want, sample{fmt.Sprintf(`{tenant=%q}`, tenant), float64(60 * i)})
		}
	}
	// What the panel must not count: t01's requests and refusals, and its sends in another namespace or
	// release.
	input = append(input, counter(sel("herald-ingress-a", "t01", "requests", "accepted"), 1000),
		counter(sel("herald-ingress-a", "t01", "sends", "refused"), 1000),
		counter(sel("other-ingress-a", "t01", "sends", "accepted"), 1000),
		counter(`namespace="elsewhere", pod="herald-ingress-a", tenant="t01", kind="sends", outcome="accepted"`, 1000))

	file := map[string]any{
		"rule_files":          []string{"empty-rules.yaml"},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval":     "1m",
			"input_series": input,
			"promql_expr_test": []any{map[string]any{
				"expr": expr, "eval_time": "60m", "exp_samples": want,
			}},
		}},
	}
	b, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "empty-rules.yaml"), []byte("groups: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usage-panel.test.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, dir, "test", "rules", "usage-panel.test.yaml"); err != nil {
		t.Fatalf("the usage panel's query did not yield the top ten tenants: %v\n%s\nquery: %s", err, out, expr)
	}
}
