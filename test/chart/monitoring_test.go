package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDashboardAndAlertsAreOffByDefault: the dashboard ConfigMap and the PrometheusRule are opt-in (a
// PrometheusRule needs prometheus-operator's CRD, and not every cluster runs Grafana's sidecar).
func TestDashboardAndAlertsAreOffByDefault(t *testing.T) {
	objs := objects(t, render(t, valueSet{"defaults", ""}))
	if n := len(ofKind(objs, "PrometheusRule")); n != 0 {
		t.Errorf("the defaults render %d PrometheusRules", n)
	}
	if o := find(objs, "ConfigMap", fullname(objs)+"-dashboards"); o != nil {
		t.Error("the defaults render the dashboard ConfigMap")
	}
}

// TestDashboardConfigMapHoldsTheFile: the ConfigMap holds files/dashboards/herald.json unchanged (the file
// test/monitoring checks), under the label Grafana's sidecar selects: grafana_dashboard: "1" by default.
func TestDashboardConfigMapHoldsTheFile(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(chartDir(t), "files", "dashboards", "herald.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		vs                     valueSet
		sets                   []string
		namespace, key, value  string
		extraLabel, annotation string
	}{
		{valueSet{"defaults", ""}, []string{"dashboards.enabled=true"}, releaseNamespace, "grafana_dashboard", "1", "", ""},
		{valueSet{"full", "ci/full-values.yaml"}, nil, "monitoring", "grafana_dashboard", "herald", "dashboards", "grafana_folder"},
	} {
		t.Run(tc.vs.name, func(t *testing.T) {
			objs := objects(t, render(t, tc.vs, tc.sets...))
			cm := find(objs, "ConfigMap", fullname(objs)+"-dashboards")
			if cm == nil {
				t.Fatal("no dashboard ConfigMap")
			}
			if cm.GetNamespace() != tc.namespace {
				t.Errorf("the ConfigMap is in %q, want %q", cm.GetNamespace(), tc.namespace)
			}
			if got := cm.GetLabels()[tc.key]; got != tc.value {
				t.Errorf("label %s=%q, want %q (the sidecar's selector)", tc.key, got, tc.value)
			}
			if tc.extraLabel != "" && cm.GetLabels()[tc.extraLabel] == "" {
				t.Errorf("dashboards.labels did not reach the ConfigMap: %v", cm.GetLabels())
			}
			if tc.annotation != "" && cm.GetAnnotations()[tc.annotation] == "" {
				t.Errorf("dashboards.annotations did not reach the ConfigMap: %v", cm.GetAnnotations())
			}
			data, _ := cm.Object["data"].(map[string]any)
			got, _ := data["herald.json"].(string)
			if got != strings.TrimRight(string(want), "\n") {
				t.Errorf("the ConfigMap's herald.json (%d bytes) is not files/dashboards/herald.json (%d bytes)", len(got), len(want))
			}
		})
	}
}

// TestPrometheusRuleHoldsTheRulesFile: the PrometheusRule's spec is files/rules/herald-rules.yaml (the file
// test/monitoring checks with promtool), with the extra labels a Prometheus selects rules by.
func TestPrometheusRuleHoldsTheRulesFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(t), "files", "rules", "herald-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, render(t, valueSet{"full", "ci/full-values.yaml"}))
	rules := ofKind(objs, "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("full-values renders %d PrometheusRules, want 1", len(rules))
	}
	r := rules[0]
	if r.GetName() != fullname(objs)+"-alerts" || r.GetNamespace() != releaseNamespace {
		t.Errorf("PrometheusRule %s/%s, want %s/%s-alerts", r.GetNamespace(), r.GetName(), releaseNamespace, fullname(objs))
	}
	if r.GetLabels()["release"] != "prometheus" {
		t.Errorf("prometheusRule.labels did not reach the PrometheusRule: %v", r.GetLabels())
	}
	if !reflect.DeepEqual(r.Object["spec"], want) {
		t.Error("the PrometheusRule's spec is not files/rules/herald-rules.yaml")
	}
	groups, _ := want["groups"].([]any)
	if len(groups) == 0 {
		t.Error("the rules file has no groups")
	}
}
