package chart

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/heraldhq/herald/internal/signing"
)

func TestWorkersScaleWithKEDAOnLagOfBothTopicsOrWithAnHPANeverBoth(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := objects(t, render(t, vs))
			worker := find(objs, "Deployment", fullname(objs)+"-worker")
			if worker == nil {
				t.Fatal("no worker Deployment")
			}
			so := ofKind(objs, "ScaledObject")
			var workerHPA []*unstructured.Unstructured
			for _, h := range ofKind(objs, "HorizontalPodAutoscaler") {
				if name, _, _ := unstructured.NestedString(h.Object, "spec", "scaleTargetRef", "name"); name == worker.GetName() {
					workerHPA = append(workerHPA, h)
				}
			}
			if len(so) > 0 && len(workerHPA) > 0 {
				t.Fatal("both a ScaledObject and an HPA scale the workers")
			}
			if _, found, _ := unstructured.NestedFieldNoCopy(worker.Object, "spec", "replicas"); found && (len(so) > 0 || len(workerHPA) > 0) {
				t.Error("the worker Deployment sets replicas although an autoscaler owns them")
			}
			if len(so) == 0 {
				return
			}
			if len(so) != 1 {
				t.Fatalf("want one ScaledObject, got %d", len(so))
			}
			spec := so[0].Object["spec"].(map[string]any)
			if spec["scaleTargetRef"].(map[string]any)["name"] != worker.GetName() {
				t.Errorf("ScaledObject targets %v, want %s", spec["scaleTargetRef"], worker.GetName())
			}
			c := containers(t, podSpec(t, worker))[0]
			group := "herald-workers" // the binary's default when the chart does not pass one
			if v := envVar(c, "HERALD_WORKER_GROUP_ID"); v != nil {
				group = fmt.Sprint(v["value"])
			}
			prefix := "herald"
			if v := envVar(c, "HERALD_KAFKA_TOPIC_PREFIX"); v != nil {
				prefix = fmt.Sprint(v["value"])
			}
			var topics []string
			for _, tr := range spec["triggers"].([]any) {
				trigger := tr.(map[string]any)
				md := trigger["metadata"].(map[string]any)
				if trigger["type"] != "kafka" {
					t.Errorf("trigger type %v, want kafka", trigger["type"])
				}
				if md["consumerGroup"] != group {
					t.Errorf("trigger consumerGroup %v, want the workers' group %q", md["consumerGroup"], group)
				}
				if md["bootstrapServers"] == nil && md["bootstrapServersFromEnv"] != "HERALD_KAFKA_BROKERS" {
					t.Errorf("trigger names no brokers: %v", md)
				}
				if md["lagThreshold"] == nil {
					t.Errorf("trigger has no lagThreshold: %v", md)
				}
				topics = append(topics, fmt.Sprint(md["topic"]))
			}
			sort.Strings(topics)
			if want := []string{prefix + ".notifications.high", prefix + ".notifications.normal"}; !slices.Equal(topics, want) {
				t.Errorf("triggers on topics %v, want %v", topics, want)
			}
		})
	}
}

func TestRenderFailsWithTheFixForInconsistentValues(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		want string
	}{
		{"more KEDA workers than partitions", []string{"worker.keda.enabled=true", "worker.keda.maxReplicaCount=13"},
			"worker.keda.maxReplicaCount (13) is above kafka.partitions (12)"},
		{"more HPA workers than partitions", []string{"kafka.partitions=6"},
			"worker.autoscaling.maxReplicas (12) is above kafka.partitions (6)"},
		{"KEDA minimum above maximum", []string{"worker.keda.enabled=true", "worker.keda.minReplicaCount=5", "worker.keda.maxReplicaCount=4"},
			"worker.keda.minReplicaCount (5) is above worker.keda.maxReplicaCount (4)"},
		{"two operators without leader election", []string{"operator.replicaCount=2", "operator.leaderElection=false"},
			"operator.replicaCount above 1 needs operator.leaderElection"},
		{"a secret given twice", []string{"secrets.botToken.value=x", "secrets.botToken.existingSecret.name=s"},
			"secrets.botToken: set either value or existingSecret.name, not both"},
		{"an unknown top-level value", []string{"replicaCount=3"}, "additional properties 'replicaCount' not allowed"},
		{"an unknown component value", []string{"worker.keda.maxReplicas=3"}, "additional properties 'maxReplicas' not allowed"},
		{"a bad log level", []string{"log.level=verbose"}, "log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := helm(t, templateArgs(valueSets[0], tt.sets...)...)
			if err == nil {
				t.Fatalf("helm template with %v succeeded, want an error containing %q", tt.sets, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error does not say %q:\n%v", tt.want, err)
			}
		})
	}
}

func TestEveryPodIsHardenedProbedAndBounded(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := objects(t, render(t, vs))
			for _, o := range append(ofKind(objs, "Deployment"), ofKind(objs, "Job")...) {
				spec := podSpec(t, o)
				pod, _ := spec["securityContext"].(map[string]any)
				if pod["runAsNonRoot"] != true {
					t.Errorf("%s: pod runAsNonRoot is not true", o.GetName())
				}
				if sp, _ := pod["seccompProfile"].(map[string]any); sp["type"] != "RuntimeDefault" {
					t.Errorf("%s: pod seccompProfile is not RuntimeDefault", o.GetName())
				}
				for _, c := range containers(t, spec) {
					where := o.GetName() + "/" + fmt.Sprint(c["name"])
					sc, _ := c["securityContext"].(map[string]any)
					if sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true || sc["runAsNonRoot"] != true {
						t.Errorf("%s: security context not hardened: %v", where, sc)
					}
					if caps, _ := sc["capabilities"].(map[string]any); !slices.Equal(stringList(caps["drop"]), []string{"ALL"}) {
						t.Errorf("%s: capabilities drop %v, want [ALL]", where, caps["drop"])
					}
					res, _ := c["resources"].(map[string]any)
					for _, kind := range []string{"requests", "limits"} {
						r, _ := res[kind].(map[string]any)
						if r["cpu"] == nil || r["memory"] == nil {
							t.Errorf("%s: resources.%s lacks cpu or memory: %v", where, kind, r)
						}
					}
					if o.GetKind() != "Deployment" {
						continue
					}
					for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
						p, _ := c[probe].(map[string]any)
						get, _ := p["httpGet"].(map[string]any)
						if get["path"] != path {
							t.Errorf("%s: %s is not an HTTP GET of %s: %v", where, probe, path, p)
						}
					}
				}
			}
		})
	}
}

func TestSecretsComeFromExistingSecretsOrTheChartMadeOne(t *testing.T) {
	secretVars := map[string]bool{"HERALD_DATABASE_URL": true, "HERALD_KAFKA_BROKERS": true,
		"HERALD_MESSENGER_BOT_TOKEN": true, "HERALD_WEBHOOK_SECRET": true, "HERALD_PHONE_HASH_KEY": true,
		"HERALD_CALLBACK_SECRET_KEY": true}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := objects(t, render(t, vs))
			secrets := map[string]*unstructured.Unstructured{}
			for _, s := range ofKind(objs, "Secret") {
				secrets[s.GetName()] = s
			}
			for _, o := range append(ofKind(objs, "Deployment"), ofKind(objs, "Job")...) {
				for _, c := range containers(t, podSpec(t, o)) {
					for _, name := range envNames(c) {
						if !secretVars[name] {
							continue
						}
						e := envVar(c, name)
						if e["value"] != nil {
							t.Errorf("%s: %s is a plain value; it must come from a Secret", o.GetName(), name)
							continue
						}
						ref, _, _ := unstructured.NestedStringMap(e, "valueFrom", "secretKeyRef")
						if s, ok := secrets[ref["name"]]; ok {
							data, _, _ := unstructured.NestedStringMap(s.Object, "data")
							if _, ok := data[ref["key"]]; !ok {
								t.Errorf("%s: %s refers to key %q, which the chart-made Secret %s lacks", o.GetName(), name, ref["key"], ref["name"])
							}
						} else if vs.name != "existing-secrets" && vs.name != "full" {
							t.Errorf("%s: %s refers to Secret %q, which the chart does not make", o.GetName(), name, ref["name"])
						}
					}
				}
			}
			if vs.name == "existing-secrets" {
				for name := range secrets {
					t.Errorf("every setting comes from an existing Secret, yet the chart makes Secret %s", name)
				}
			}
		})
	}
}

// TestChartCRDsAreConfigCRDs: the chart installs exactly the CRDs controller-gen wrote into
// config/crd/bases, with only the chart's labels and the keep annotation added.
func TestChartCRDsAreConfigCRDs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (make manifests): %v", err)
	}
	objs := objects(t, render(t, valueSets[0]))
	rendered := ofKind(objs, "CustomResourceDefinition")
	if len(rendered) != len(files) {
		t.Errorf("chart renders %d CRDs, config/crd/bases has %d (run hack/sync-chart-crds.sh)", len(rendered), len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		name := want["metadata"].(map[string]any)["name"].(string)
		got := find(rendered, "CustomResourceDefinition", name)
		if got == nil {
			t.Errorf("chart lacks CRD %s (run hack/sync-chart-crds.sh)", name)
			continue
		}
		if got.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s lacks helm.sh/resource-policy: keep with crds.keep=true", name)
		}
		if !reflect.DeepEqual(want["spec"], got.Object["spec"]) {
			w, _ := json.Marshal(want["spec"])
			g, _ := json.Marshal(got.Object["spec"])
			t.Errorf("CRD %s in the chart differs from %s (run hack/sync-chart-crds.sh):\nwant %s\ngot  %s", name, f, w, g)
		}
	}
	noKeep := objects(t, render(t, valueSets[0], "crds.keep=false"))
	for _, crd := range ofKind(noKeep, "CustomResourceDefinition") {
		if _, ok := crd.GetAnnotations()["helm.sh/resource-policy"]; ok {
			t.Errorf("CRD %s keeps the resource policy with crds.keep=false", crd.GetName())
		}
	}
	if crds := ofKind(objects(t, render(t, valueSets[0], "crds.enabled=false")), "CustomResourceDefinition"); len(crds) != 0 {
		t.Errorf("crds.enabled=false still renders %d CRDs", len(crds))
	}
}

func TestMigrationRunsAsAPreInstallAndPreUpgradeHook(t *testing.T) {
	objs := objects(t, render(t, valueSets[0]))
	job := find(objs, "Job", releaseName+"-migrate")
	if job == nil {
		t.Fatal("no migrate Job")
	}
	if hook := job.GetAnnotations()["helm.sh/hook"]; hook != "pre-install,pre-upgrade" {
		t.Errorf("migrate Job hook %q, want pre-install,pre-upgrade", hook)
	}
	c := containers(t, podSpec(t, job))[0]
	if args := stringList(c["args"]); !slices.Equal(args, []string{"migrate"}) {
		t.Errorf("migrate Job args %v, want [migrate]", args)
	}
	// Everything the hook uses must exist before the release's ordinary objects do: it is a hook too.
	spec := podSpec(t, job)
	for _, dep := range []struct{ kind, name string }{
		{"ServiceAccount", fmt.Sprint(spec["serviceAccountName"])},
		{"Secret", fmt.Sprint(envVar(c, "HERALD_DATABASE_URL")["valueFrom"].(map[string]any)["secretKeyRef"].(map[string]any)["name"])},
	} {
		o := find(objs, dep.kind, dep.name)
		if o == nil {
			t.Errorf("migrate Job uses %s %s, which the chart does not render", dep.kind, dep.name)
			continue
		}
		if o.GetAnnotations()["helm.sh/hook"] == "" {
			t.Errorf("%s %s is used by the pre-install hook but is not a hook itself: it would not exist yet", dep.kind, dep.name)
		}
	}
}

// TestEveryValueIsInTheSchemaAndTheREADME walks values.yaml: each leaf must be a property of
// values.schema.json and a row of the README's values table.
func TestEveryValueIsInTheSchemaAndTheREADME(t *testing.T) {
	dir := chartDir(t)
	var values map[string]any
	readYAML(t, filepath.Join(dir, "values.yaml"), &values)
	var schema map[string]any
	readJSON(t, filepath.Join(dir, "values.schema.json"), &schema)
	if schema["additionalProperties"] != false {
		t.Error("values.schema.json does not set additionalProperties: false at the top")
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range leaves(values, "") {
		if !schemaHas(schema, schema, strings.Split(path, ".")) {
			t.Errorf("values.schema.json does not describe %s", path)
		}
		if !strings.Contains(string(readme), "| `"+path+"` |") {
			t.Errorf("README.md has no row for %s", path)
		}
	}
}

// leaves lists the dotted paths of the values that are not maps with keys (an empty map is a leaf).
func leaves(v any, prefix string) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 || prefix == "podSecurityContext" || prefix == "securityContext" || strings.HasSuffix(prefix, ".resources") {
		return []string{prefix}
	}
	var out []string
	for k, child := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, leaves(child, p)...)
	}
	sort.Strings(out)
	return out
}

func schemaHas(root, node map[string]any, path []string) bool {
	node = resolve(root, node)
	if len(path) == 0 {
		return true
	}
	props, _ := node["properties"].(map[string]any)
	child, ok := props[path[0]].(map[string]any)
	if !ok {
		return false
	}
	return schemaHas(root, child, path[1:])
}

// resolve follows a $ref, or an allOf of one $ref, within the schema.
func resolve(root, node map[string]any) map[string]any {
	if all, ok := node["allOf"].([]any); ok && len(all) == 1 {
		node = all[0].(map[string]any)
	}
	if ref, ok := node["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/definitions/")
		return root["definitions"].(map[string]any)[name].(map[string]any)
	}
	return node
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestSyncScriptFindsNoDrift runs hack/sync-chart-crds.sh in check mode: the chart's CRDs and operator
// RBAC are what config/ holds.
func TestSyncScriptFindsNoDrift(t *testing.T) {
	cmd := exec.Command("bash", "hack/sync-chart-crds.sh", "check")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("hack/sync-chart-crds.sh check: %v\n%s", err, out)
	}
}

// The callback senders reach the tenants' endpoints (callbacks.egress) when egress is restricted, and
// nothing else gets those rules; the chart-made callback secret key is one herald accepts.
func TestCallbackSendersHaveTheirEgressAndAValidKey(t *testing.T) {
	objs := objects(t, render(t, valueSet{"full", "ci/full-values.yaml"}))
	for _, np := range ofKind(objs, "NetworkPolicy") {
		egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
		has8443 := strings.Contains(fmt.Sprint(egress), "8443")
		if callbacks := strings.HasSuffix(np.GetName(), "-callbacks"); callbacks != has8443 {
			t.Errorf("NetworkPolicy %s: callbacks.egress present %v, want %v", np.GetName(), has8443, callbacks)
		}
	}
	for _, s := range ofKind(objects(t, render(t, valueSet{"defaults", ""})), "Secret") {
		data, _, _ := unstructured.NestedStringMap(s.Object, "data")
		v, ok := data["callback-secret-key"]
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := signing.ParseKey(string(raw)); err != nil {
			t.Errorf("the generated callback-secret-key %v", err)
		}
		return
	}
	t.Error("the defaults make no callback-secret-key")
}
