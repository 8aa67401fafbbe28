package monitoring

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const runbookBase = "https://github.com/heraldhq/herald/blob/main/docs/operations.md#"

// unitTests is the promtool unit test file of the rules.
func unitTestsPath(t testing.TB) string {
	return filepath.Join(repoRoot(t), "test", "monitoring", "testdata", "herald-rules.test.yaml")
}

// TestRulesPassPromtoolCheck: the shipped rules file parses, and its expressions and templates are valid.
func TestRulesPassPromtoolCheck(t *testing.T) {
	f := readRules(t, rulesPath(t))
	out, err := promtool(t, filepath.Dir(rulesPath(t)), "check", "rules", filepath.Base(rulesPath(t)))
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if n := len(f.rules()); n < 10 || !strings.Contains(out, "SUCCESS: ") {
		t.Errorf("promtool checked %d rules:\n%s", n, out)
	}
}

// TestAlertRulesUnitTests runs the alerts' unit tests: series histories where each alert fires, at the time
// it should and with its labels and annotations, and where it stays quiet.
func TestAlertRulesUnitTests(t *testing.T) {
	out, err := promtool(t, filepath.Dir(unitTestsPath(t)), "test", "rules", filepath.Base(unitTestsPath(t)))
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules did not succeed:\n%s", out)
	}
}

type unitTestFile struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertIsTestedFiringAndQuiet: the unit tests read the file the chart ships, and each alert has a
// case where it fires and one where it must not.
func TestEveryAlertIsTestedFiringAndQuiet(t *testing.T) {
	b, err := os.ReadFile(unitTestsPath(t))
	if err != nil {
		t.Fatal(err)
	}
	var f unitTestFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.RuleFiles) != 1 {
		t.Fatalf("the unit tests read %v, want the chart's rules file alone", f.RuleFiles)
	}
	if got, _ := filepath.Abs(filepath.Join(filepath.Dir(unitTestsPath(t)), f.RuleFiles[0])); got != rulesPath(t) {
		t.Errorf("the unit tests read %s, want %s", got, rulesPath(t))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	alerts := 0
	for _, r := range readRules(t, rulesPath(t)).rules() {
		if r.Alert == "" {
			continue
		}
		alerts++
		if !fires[r.Alert] {
			t.Errorf("no unit test makes %s fire", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("no unit test checks that %s stays quiet", r.Alert)
		}
	}
	if alerts == 0 {
		t.Fatal("the rules file has no alerts")
	}
}

// runbookSection is an alert's section of docs/operations.md: from its "### <Alert>" heading to the next
// heading of the same or a higher level.
func runbookSection(doc, alert string) string {
	start := regexp.MustCompile(`(?m)^### ` + regexp.QuoteMeta(alert) + `\s*$`).FindStringIndex(doc)
	if start == nil {
		return ""
	}
	rest := doc[start[1]:]
	if end := regexp.MustCompile(`(?m)^#{1,3} `).FindStringIndex(rest); end != nil {
		rest = rest[:end[0]]
	}
	return rest
}

// TestEveryAlertHasARunbook: each alert has a severity, an explicit `for`, a summary, a description and a
// runbook_url that is its section of docs/operations.md; the section says what the alert means, why its
// threshold, the likely causes, what to look at and what to do.
func TestEveryAlertHasARunbook(t *testing.T) {
	doc, err := os.ReadFile(operationsPath(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readRules(t, rulesPath(t)).rules() {
		if r.Alert == "" {
			continue
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		if r.For == "" {
			t.Errorf("%s: no `for` (write for: 0m when the alert must fire at once, and say why in its runbook)", r.Alert)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: needs a summary and a description", r.Alert)
		}
		if want := runbookBase + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		section := runbookSection(string(doc), r.Alert)
		if section == "" {
			t.Errorf("docs/operations.md has no section \"### %s\"", r.Alert)
			continue
		}
		for _, part := range []string{"**Meaning.**", "**Threshold.**", "**Likely causes.**", "**Look at.**", "**Do.**"} {
			if !strings.Contains(section, part) {
				t.Errorf("the runbook of %s in docs/operations.md lacks its %s paragraph", r.Alert, part)
			}
		}
		if r.For != "" && !strings.Contains(section, "`for: "+r.For+"`") {
			t.Errorf("the runbook of %s does not explain its `for: %s`", r.Alert, r.For)
		}
	}
}
