package chart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestRenderedObjectsAreAcceptedByAnAPIServer applies every object of every value set to a real
// kube-apiserver (envtest) with server-side apply in dry-run mode and strict field validation: unknown
// fields, wrong types, invalid values and CRD schema violations all fail here.
func TestRenderedObjectsAreAcceptedByAnAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: it must name a directory with kube-apiserver and etcd " +
			"(make test sets it; by hand: KUBEBUILDER_ASSETS=$(hack/envtest.sh | tail -n 1))")
	}
	root := repoRoot(t)
	env := &envtest.Environment{
		CRDDirectoryPaths: []string{
			filepath.Join(root, "config", "crd", "bases"),
			// KEDA's ScaledObject and prometheus-operator's ServiceMonitor and PrometheusRule, reduced to the
			// fields the chart sets.
			filepath.Join("testdata", "crds"),
		},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (KUBEBUILDER_ASSETS=%s): %v", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clientset := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(
		discovery.NewDiscoveryClientForConfigOrDie(cfg)))

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}
	if _, err := clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", releaseNamespace, err)
	}

	apply := func(obj *unstructured.Unstructured) error {
		mapping, err := mapper.RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version)
		if err != nil {
			return fmt.Errorf("the API server does not serve %s: %w", obj.GroupVersionKind(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				return errors.New("namespaced object without metadata.namespace")
			}
			ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		} else if obj.GetNamespace() != "" {
			return fmt.Errorf("cluster-scoped object with metadata.namespace %q", obj.GetNamespace())
		}
		data, err := json.Marshal(obj.Object)
		if err != nil {
			return err
		}
		_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			DryRun:          []string{metav1.DryRunAll},
			FieldManager:    "herald-chart-test",
			Force:           ptrTo(true),
			FieldValidation: "Strict",
		})
		return err
	}

	// The check is only worth something if the server rejects what it should: a misspelt field of a built-in
	// kind and of the vendored ScaledObject.
	t.Run("rejects unknown fields", func(t *testing.T) {
		for _, tc := range []struct{ doc, field string }{
			{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad, namespace: herald}\nspec: {replicaz: 1}\n", "replicaz"},
			{"apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: bad, namespace: herald}\n" +
				"spec: {scaleTargetRef: {name: w}, maxReplicas: 3, triggers: [{type: kafka, metadata: {topic: t}}]}\n", "maxReplicas"},
			{"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: bad, namespace: herald}\n" +
				"spec: {groups: [{name: g, rules: [{alert: A, expr: up, fro: 5m}]}]}\n", "fro"},
		} {
			obj := objects(t, tc.doc)[0]
			err := apply(obj)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("the API server did not reject the unknown field %s of a %s (error: %v); the dry-run proves nothing",
					tc.field, obj.GetKind(), err)
			}
		}
	})

	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := objects(t, render(t, vs))
			// The namespaces the release reaches into besides its own (the operator's RoleBindings in the
			// API-key namespaces) exist before an install.
			for _, obj := range objs {
				if obj.GetNamespace() == "" || obj.GetNamespace() == releaseNamespace {
					continue
				}
				_, err := clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetNamespace()}}, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatalf("creating namespace %s: %v", obj.GetNamespace(), err)
				}
			}
			for _, obj := range objs {
				if err := apply(obj); err != nil {
					t.Errorf("%s %s rejected: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestKEDACRDInTestdataIsAScaledObject guards the vendored CRD: the dry-run only means something for
// ScaledObjects if the file really defines keda.sh/v1alpha1 ScaledObject.
func TestKEDACRDInTestdataIsAScaledObject(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "crds", "keda.sh_scaledobjects.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: scaledobjects.keda.sh", "group: keda.sh", "kind: ScaledObject", "name: v1alpha1"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("testdata/crds/keda.sh_scaledobjects.yaml lacks %q", want)
		}
	}
}
