package chart

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Herald refuses webhook secrets shorter than 16 characters at start; the chart refuses them at install,
// and what it generates is long enough.
func TestTheWebhookSecretIsAtLeast16Characters(t *testing.T) {
	_, err := helm(t, templateArgs(valueSets[0], "secrets.webhookSecret.value=short_secret")...)
	if err == nil || !strings.Contains(err.Error(), "secrets.webhookSecret.value must be 16-256 characters") {
		t.Errorf("a 12-character webhook secret: %v, want the render to fail saying so", err)
	}
	objs := objects(t, render(t, valueSets[0]))
	s := find(objs, "Secret", fullname(objs))
	if s == nil {
		t.Fatal("no chart-made Secret")
	}
	data, _, _ := unstructured.NestedStringMap(s.Object, "data")
	b, err := base64.StdEncoding.DecodeString(data["webhook-secret"])
	if err != nil {
		t.Fatal(err)
	}
	raw := string(b)
	if len(raw) < 16 || strings.Trim(raw, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != "" {
		t.Errorf("the generated webhook secret has %d characters (%q…), want 16-256 of A-Za-z0-9_-", len(raw), raw[:min(4, len(raw))])
	}
}

// httpComponents serve the API (or the webhook) and /metrics.
var httpComponents = []string{"ingress", "webhook", "worker"}

func containerPorts(c map[string]any) map[string]int64 {
	out := map[string]int64{}
	for _, p := range c["ports"].([]any) {
		m := p.(map[string]any)
		out[fmt.Sprint(m["name"])] = toInt(m["containerPort"])
	}
	return out
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return -1
}

// /metrics is served on a port of its own (HERALD_METRICS_ADDR), which no Service the Kubernetes Ingress
// routes to exposes; the scrape annotations and the ServiceMonitor point at it.
func TestMetricsAreServedApartFromTheAPI(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := objects(t, render(t, vs))
			name := fullname(objs)
			for _, comp := range httpComponents {
				d := find(objs, "Deployment", name+"-"+comp)
				c := containers(t, podSpec(t, d))[0]
				ports := containerPorts(c)
				if ports["metrics"] == 0 || ports["metrics"] == ports["http"] {
					t.Errorf("%s: container ports %v, want a metrics port apart from http", comp, ports)
					continue
				}
				env := envVar(c, "HERALD_METRICS_ADDR")
				if env == nil || env["value"] != fmt.Sprintf(":%d", ports["metrics"]) {
					t.Errorf("%s: HERALD_METRICS_ADDR %v, want :%d", comp, env, ports["metrics"])
				}
				ann, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations")
				if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != fmt.Sprint(ports["metrics"]) || ann["prometheus.io/path"] != "/metrics" {
					t.Errorf("%s: scrape annotations %v, want the metrics port", comp, ann)
				}
				if svc := find(objs, "Service", name+"-"+comp); svc != nil {
					list, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
					for _, p := range list {
						if tp := p.(map[string]any)["targetPort"]; tp == "metrics" || toInt(tp) == ports["metrics"] {
							t.Errorf("%s: Service %s exposes the metrics port", comp, svc.GetName())
						}
					}
				}
			}
			for _, sm := range ofKind(objs, "ServiceMonitor") {
				eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				if len(eps) != 1 || eps[0].(map[string]any)["port"] != "metrics" {
					t.Errorf("ServiceMonitor endpoints %v, want the metrics port", eps)
				}
				sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
				var svc *unstructured.Unstructured
				for _, s := range ofKind(objs, "Service") {
					if labelsMatch(s.GetLabels(), sel) {
						svc = s
					}
				}
				if svc == nil {
					t.Fatalf("the ServiceMonitor selects %v: no Service has these labels", sel)
				}
				list, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
				if len(list) != 1 || list[0].(map[string]any)["targetPort"] != "metrics" {
					t.Errorf("metrics Service %s ports %v, want only the metrics port", svc.GetName(), list)
				}
			}
		})
	}
	if len(ofKind(objects(t, render(t, valueSet{"full", "ci/full-values.yaml"})), "ServiceMonitor")) == 0 {
		t.Error("no value set renders the ServiceMonitor")
	}
}

func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// policyOf returns the NetworkPolicy selecting a component's pods.
func policyOf(objs []*unstructured.Unstructured, component string) *unstructured.Unstructured {
	for _, np := range ofKind(objs, "NetworkPolicy") {
		sel, _, _ := unstructured.NestedStringMap(np.Object, "spec", "podSelector", "matchLabels")
		if sel["app.kubernetes.io/component"] == component {
			return np
		}
	}
	return nil
}

type portRule struct {
	ports []string // "TCP/8080"
	from  int      // number of peers; 0: any
}

func rules(t *testing.T, np *unstructured.Unstructured, direction string) []portRule {
	t.Helper()
	list, _, _ := unstructured.NestedSlice(np.Object, "spec", direction)
	var out []portRule
	for _, r := range list {
		m := r.(map[string]any)
		var pr portRule
		ports, _ := m["ports"].([]any)
		for _, p := range ports {
			pm := p.(map[string]any)
			pr.ports = append(pr.ports, fmt.Sprintf("%v/%d", pm["protocol"], toInt(pm["port"])))
		}
		peers, _ := m[map[string]string{"ingress": "from", "egress": "to"}[direction]].([]any)
		pr.from = len(peers)
		out = append(out, pr)
	}
	return out
}

// NetworkPolicies are rendered by default and let through only what each component needs: the API and the
// webhook from anywhere on their port, /metrics only from the peers networkPolicy.metricsFrom names, and
// egress only to DNS, PostgreSQL, Kafka, the Bot API and (the operator) the Kubernetes API.
func TestNetworkPoliciesByDefaultOpenOnlyWhatEachComponentNeeds(t *testing.T) {
	objs := objects(t, render(t, valueSets[0]))
	var metricsPort int64
	for _, c := range containers(t, podSpec(t, find(objs, "Deployment", fullname(objs)+"-worker"))) {
		metricsPort = containerPorts(c)["metrics"]
	}
	metrics := fmt.Sprintf("TCP/%d", metricsPort)
	wantIngress := map[string][]portRule{
		"operator": {{ports: []string{"TCP/8443"}, from: 1}}, // its secure metrics (operator.metricsPort)
		"ingress":  {{ports: []string{"TCP/8080"}}, {ports: []string{metrics}, from: 1}},
		"webhook":  {{ports: []string{"TCP/8080"}}, {ports: []string{metrics}, from: 1}},
		"worker":   {{ports: []string{metrics}, from: 1}},
		"migrate":  nil,
	}
	dns := portRule{ports: []string{"UDP/53", "TCP/53"}}
	pg, kafka, bot := portRule{ports: []string{"TCP/5432"}}, portRule{ports: []string{"TCP/9092"}}, portRule{ports: []string{"TCP/443"}}
	wantEgress := map[string][]portRule{
		"operator": {dns, pg, {ports: []string{"TCP/443", "TCP/6443"}}, bot}, // the Bot API: registering tenants' own bots
		"ingress":  {dns, pg, kafka},
		"webhook":  {dns, pg, kafka, bot},
		"worker":   {dns, pg, kafka, bot},
		"migrate":  {dns, pg},
	}
	for comp, want := range wantIngress {
		np := policyOf(objs, comp)
		if np == nil {
			t.Errorf("no NetworkPolicy selects the %s pods by default", comp)
			continue
		}
		types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
		if !slices.Equal(types, []string{"Ingress", "Egress"}) {
			t.Errorf("%s: policyTypes %v, want [Ingress Egress]", comp, types)
		}
		if got := rules(t, np, "ingress"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: ingress rules %v, want %v", comp, got, want)
		}
		if got := rules(t, np, "egress"); fmt.Sprint(got) != fmt.Sprint(wantEgress[comp]) {
			t.Errorf("%s: egress rules %v, want %v", comp, got, wantEgress[comp])
		}
	}
	if off := objects(t, render(t, valueSets[0], "networkPolicy.enabled=false")); len(ofKind(off, "NetworkPolicy")) != 0 {
		t.Error("networkPolicy.enabled=false still renders NetworkPolicies")
	}
	open := objects(t, render(t, valueSets[0], "networkPolicy.egress.enabled=false"))
	if types, _, _ := unstructured.NestedStringSlice(policyOf(open, "worker").Object, "spec", "policyTypes"); !slices.Equal(types, []string{"Ingress"}) {
		t.Errorf("networkPolicy.egress.enabled=false: policyTypes %v, want [Ingress]", types)
	}
}

// checksum/secrets rolls the pods when a secret value changes, but reads as noise to whoever can read pod
// specs (far more people than can read Secrets): it is a hash salted with a random value kept in the
// chart-made Secret, so a guess of a secret value cannot be confirmed against it.
func TestChecksumAnnotationDoesNotConfirmGuessesOfSecretValues(t *testing.T) {
	var values map[string]any
	readYAML(t, filepath.Join(chartDir(t), "values.yaml"), &values)
	secrets := values["secrets"].(map[string]any)
	secrets["databaseURL"].(map[string]any)["value"] = "postgres://herald@db:5432/herald"
	secrets["kafkaBrokers"].(map[string]any)["value"] = "kafka:9092"
	secrets["botToken"].(map[string]any)["value"] = "123:abc"
	secrets["webhookSecret"].(map[string]any)["value"] = "guessable-secret-0042"
	secrets["phoneHashKey"].(map[string]any)["value"] = "0123456789abcdef"
	sets := []string{"secrets.databaseURL.value=postgres://herald@db:5432/herald", "secrets.kafkaBrokers.value=kafka:9092",
		"secrets.botToken.value=123:abc", "secrets.webhookSecret.value=guessable-secret-0042", "secrets.phoneHashKey.value=0123456789abcdef"}
	checksum := func(objs []*unstructured.Unstructured) string {
		d := find(objs, "Deployment", fullname(objs)+"-worker")
		ann, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations")
		return ann["checksum/secrets"]
	}
	got := checksum(objects(t, render(t, valueSets[0], sets...)))
	if got == "" {
		t.Fatal("no checksum/secrets annotation")
	}
	// An attacker who knows everything but the webhook secret tries candidates.
	for i := range 100 {
		secrets["webhookSecret"].(map[string]any)["value"] = fmt.Sprintf("guessable-secret-%04d", i)
		b, _ := json.Marshal(secrets)
		if fmt.Sprintf("%x", sha256.Sum256(b)) == got {
			t.Fatalf("checksum/secrets confirms the guess %q of the webhook secret: it is an unsalted hash of the values", secrets["webhookSecret"].(map[string]any)["value"])
		}
	}
	// Salted: the same values with another salt hash differently; the same salt and values, the same.
	a := checksum(objects(t, render(t, valueSets[0], append(sets, "secrets.checksumSalt=salt-one")...)))
	b := checksum(objects(t, render(t, valueSets[0], append(sets, "secrets.checksumSalt=salt-two")...)))
	again := checksum(objects(t, render(t, valueSets[0], append(sets, "secrets.checksumSalt=salt-one")...)))
	if a == b || a != again {
		t.Errorf("checksums: salt-one %s, salt-two %s, salt-one again %s; want the salt to change it and nothing else", a, b, again)
	}
	// A changed secret value rolls the pods; a changed plain value does not.
	changed := checksum(objects(t, render(t, valueSets[0], append(sets, "secrets.checksumSalt=salt-one", "secrets.botToken.value=123:xyz")...)))
	plain := checksum(objects(t, render(t, valueSets[0], append(sets, "secrets.checksumSalt=salt-one", "log.level=debug")...)))
	if changed == a || plain != a {
		t.Errorf("a new bot token: %s (was %s), want a change; a new log level: %s, want none", changed, a, plain)
	}
	// The salt is kept with the values it protects: in the chart-made Secret, not in the pod spec.
	objs := objects(t, render(t, valueSets[0], sets...))
	data, _, _ := unstructured.NestedStringMap(find(objs, "Secret", fullname(objs)).Object, "data")
	if data["checksum-salt"] == "" {
		t.Error("the chart-made Secret holds no checksum-salt")
	}
}

// The trusted proxies value reaches the ingress; retention values reach the workers.
func TestTrustedProxiesAndRetentionReachTheirComponents(t *testing.T) {
	objs := objects(t, render(t, valueSets[0], "ingress.trustedProxies={10.0.0.0/8,192.0.2.1}", "retention.bodyDays=3",
		"retention.notificationDays=30", "retention.expired=12h", "retention.callbackDays=2"))
	ingress := containers(t, podSpec(t, find(objs, "Deployment", fullname(objs)+"-ingress")))[0]
	if v := envVar(ingress, "HERALD_TRUSTED_PROXIES"); v == nil || v["value"] != "10.0.0.0/8,192.0.2.1" {
		t.Errorf("HERALD_TRUSTED_PROXIES on the ingress: %v", v)
	}
	worker := containers(t, podSpec(t, find(objs, "Deployment", fullname(objs)+"-worker")))[0]
	for name, want := range map[string]string{"HERALD_RETENTION_BODY_DAYS": "3", "HERALD_RETENTION_NOTIFICATION_DAYS": "30", "HERALD_RETENTION_EXPIRED": "12h",
		"HERALD_RETENTION_CALLBACK_DAYS": "2"} {
		if v := envVar(worker, name); v == nil || v["value"] != want {
			t.Errorf("%s on the worker: %v, want %s", name, v, want)
		}
	}
}
