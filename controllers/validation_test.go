package controllers_test

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
)

// The schema and CEL rules of the CRDs, checked against the real API server with the exact messages a
// `kubectl apply` of a bad object prints.

func TestTenantSchemaRejectsBadObjects(t *testing.T) {
	ctx := context.Background()
	valid := func(name string) *notifyv1alpha1.Tenant {
		return &notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: notifyv1alpha1.TenantSpec{DisplayName: "Acme"}}
	}
	tests := []struct {
		name   string
		tenant func() *notifyv1alpha1.Tenant
		want   string
	}{
		{"empty displayName", func() *notifyv1alpha1.Tenant {
			tn := valid("v-empty-display")
			tn.Spec.DisplayName = ""
			return tn
		}, `Tenant.notify.herald.dev "v-empty-display" is invalid: spec.displayName: Invalid value: "": spec.displayName in body should be at least 1 chars long`},
		{"displayName too long", func() *notifyv1alpha1.Tenant {
			tn := valid("v-long-display")
			tn.Spec.DisplayName = strings.Repeat("é", 129)
			return tn
		}, `Tenant.notify.herald.dev "v-long-display" is invalid: [spec.displayName: Too long: may not be more than 128 bytes, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`},
		{"displayName with a newline", func() *notifyv1alpha1.Tenant {
			tn := valid("v-newline-display")
			tn.Spec.DisplayName = "Acme\nCorp"
			return tn
		}, `Tenant.notify.herald.dev "v-newline-display" is invalid: spec.displayName: Invalid value: "Acme\nCorp": spec.displayName in body should match '^[^\p{Cc}]+$'`},
		{"name not a DNS label", func() *notifyv1alpha1.Tenant { return valid("acme.example") },
			`Tenant.notify.herald.dev "acme.example" is invalid: <nil>: Invalid value: metadata.name must be a DNS label (at most 63 characters: lowercase letters, digits and '-')`},
		{"developer id zero", func() *notifyv1alpha1.Tenant {
			tn := valid("v-dev-zero")
			tn.Spec.Developers = []int64{0}
			return tn
		}, `Tenant.notify.herald.dev "v-dev-zero" is invalid: spec.developers[0]: Invalid value: 0: spec.developers[0] in body should be greater than or equal to 1`},
		{"duplicate developer", func() *notifyv1alpha1.Tenant {
			tn := valid("v-dev-dup")
			tn.Spec.Developers = []int64{5, 5}
			return tn
		}, `Tenant.notify.herald.dev "v-dev-dup" is invalid: spec.developers[1]: Duplicate value: 5`},
		{"namespace not a DNS label", func() *notifyv1alpha1.Tenant {
			tn := valid("v-bad-ns")
			tn.Spec.ApiKeyNamespaces = []string{"Team_A"}
			return tn
		}, `Tenant.notify.herald.dev "v-bad-ns" is invalid: spec.apiKeyNamespaces[0]: Invalid value: "Team_A": spec.apiKeyNamespaces[0] in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`},
		{"burst below the rate", func() *notifyv1alpha1.Tenant {
			tn := valid("v-low-burst")
			tn.Spec.Limits = &notifyv1alpha1.TenantLimits{SendsPerSecond: ptr.To(int32(100)), Burst: ptr.To(int32(10))}
			return tn
		}, `Tenant.notify.herald.dev "v-low-burst" is invalid: spec.limits: Invalid value: burst must be at least sendsPerSecond`},
		{"zero rate", func() *notifyv1alpha1.Tenant {
			tn := valid("v-zero-rate")
			tn.Spec.Limits = &notifyv1alpha1.TenantLimits{RequestsPerSecond: ptr.To(int32(0))}
			return tn
		}, `Tenant.notify.herald.dev "v-zero-rate" is invalid: spec.limits.requestsPerSecond: Invalid value: 0: spec.limits.requestsPerSecond in body should be greater than or equal to 1`},
		{"weight too high", func() *notifyv1alpha1.Tenant {
			tn := valid("v-heavy")
			tn.Spec.Limits = &notifyv1alpha1.TenantLimits{DeliveryWeight: ptr.To(int32(101))}
			return tn
		}, `Tenant.notify.herald.dev "v-heavy" is invalid: spec.limits.deliveryWeight: Invalid value: 101: spec.limits.deliveryWeight in body should be less than or equal to 100`},
		{"bot token outside apiKeyNamespaces", func() *notifyv1alpha1.Tenant {
			tn := valid("v-bot-elsewhere")
			tn.Spec.ApiKeyNamespaces = []string{"shop"}
			tn.Spec.Bot = botIn("kube-system")
			return tn
		}, `Tenant.notify.herald.dev "v-bot-elsewhere" is invalid: spec.bot.tokenSecretRef.namespace: Invalid value: bot.tokenSecretRef.namespace must be one of apiKeyNamespaces (the namespaces where the operator is granted Secrets)`},
		{"bot without apiKeyNamespaces", func() *notifyv1alpha1.Tenant {
			tn := valid("v-bot-no-ns")
			tn.Spec.Bot = botIn("shop")
			return tn
		}, `Tenant.notify.herald.dev "v-bot-no-ns" is invalid: spec.bot.tokenSecretRef.namespace: Invalid value: bot.tokenSecretRef.namespace must be one of apiKeyNamespaces (the namespaces where the operator is granted Secrets)`},
		{"bot rate too high", func() *notifyv1alpha1.Tenant {
			tn := valid("v-bot-fast")
			tn.Spec.ApiKeyNamespaces = []string{"shop"}
			tn.Spec.Bot = botIn("shop")
			tn.Spec.Bot.RateLimit = ptr.To(int32(1001))
			return tn
		}, `Tenant.notify.herald.dev "v-bot-fast" is invalid: spec.bot.rateLimit: Invalid value: 1001: spec.bot.rateLimit in body should be less than or equal to 1000`},
		{"bot rate zero", func() *notifyv1alpha1.Tenant {
			tn := valid("v-bot-zero")
			tn.Spec.ApiKeyNamespaces = []string{"shop"}
			tn.Spec.Bot = botIn("shop")
			tn.Spec.Bot.RateLimit = ptr.To(int32(0))
			return tn
		}, `Tenant.notify.herald.dev "v-bot-zero" is invalid: spec.bot.rateLimit: Invalid value: 0: spec.bot.rateLimit in body should be greater than or equal to 1`},
		{"bot Secret key with a slash", func() *notifyv1alpha1.Tenant {
			tn := valid("v-bot-key")
			tn.Spec.ApiKeyNamespaces = []string{"shop"}
			tn.Spec.Bot = botIn("shop")
			tn.Spec.Bot.TokenSecretRef.Key = "a/b"
			return tn
		}, `Tenant.notify.herald.dev "v-bot-key" is invalid: spec.bot.tokenSecretRef.key: Invalid value: "a/b": spec.bot.tokenSecretRef.key in body should match '^[-._a-zA-Z0-9]+$'`},
		{"quiet hours not a time of day", func() *notifyv1alpha1.Tenant {
			tn := valid("v-quiet-time")
			tn.Spec.QuietHours = &notifyv1alpha1.TenantQuietHours{Start: "22:00", End: "8:00", TimeZone: "Europe/Berlin"}
			return tn
		}, `Tenant.notify.herald.dev "v-quiet-time" is invalid: spec.quietHours.end: Invalid value: "8:00": spec.quietHours.end in body should match '^([01][0-9]|2[0-3]):[0-5][0-9]$'`},
		{"quiet hours of no length", func() *notifyv1alpha1.Tenant {
			tn := valid("v-quiet-empty")
			tn.Spec.QuietHours = &notifyv1alpha1.TenantQuietHours{Start: "22:00", End: "22:00", TimeZone: "Europe/Berlin"}
			return tn
		}, `Tenant.notify.herald.dev "v-quiet-empty" is invalid: spec.quietHours: Invalid value: quietHours.start and quietHours.end must differ`},
		{"quiet hours in an unknown zone", func() *notifyv1alpha1.Tenant {
			tn := valid("v-quiet-zone")
			tn.Spec.QuietHours = &notifyv1alpha1.TenantQuietHours{Start: "22:00", End: "08:00", TimeZone: "Mars/Olympus"}
			return tn
		}, `Tenant.notify.herald.dev "v-quiet-zone" is invalid: spec.quietHours: Invalid value: "object": unknown time zone Mars/Olympus evaluating rule: quietHours.timeZone must be an IANA time zone name, like Europe/Berlin`},
		{"quiet hours in another mode", func() *notifyv1alpha1.Tenant {
			tn := valid("v-quiet-mode")
			tn.Spec.QuietHours = &notifyv1alpha1.TenantQuietHours{Start: "22:00", End: "08:00", TimeZone: "UTC", Mode: "loud"}
			return tn
		}, `Tenant.notify.herald.dev "v-quiet-mode" is invalid: [spec.quietHours.mode: Unsupported value: "loud": supported values: "hold", "silent", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`},
	}
	// Lengths count characters, not bytes: 128 two-byte characters are fine.
	long := valid("v-long-ok")
	long.Spec.DisplayName = strings.Repeat("é", 128)
	if err := k8s.Create(ctx, long); err != nil {
		t.Errorf("a displayName of 128 characters (256 bytes): %v", err)
	} else {
		_ = k8s.Delete(ctx, long)
	}
	// A bot whose Secret is in a listed namespace is fine, with or without its settings; a namespace taken
	// out of apiKeyNamespaces while the bot's Secret is there is refused.
	withBot := valid("v-bot-ok")
	withBot.Spec.ApiKeyNamespaces = []string{"team-a", "shop"}
	withBot.Spec.Bot = botIn("shop")
	withBot.Spec.Bot.RateLimit, withBot.Spec.Bot.PaidBroadcast = ptr.To(int32(1000)), true
	if err := k8s.Create(ctx, withBot); err != nil {
		t.Errorf("a bot whose Secret is in a listed namespace: %v", err)
	} else {
		withBot.Spec.ApiKeyNamespaces = []string{"team-a"}
		err := k8s.Update(ctx, withBot)
		if want := `Tenant.notify.herald.dev "v-bot-ok" is invalid: spec.bot.tokenSecretRef.namespace: Invalid value: bot.tokenSecretRef.namespace must be one of apiKeyNamespaces (the namespaces where the operator is granted Secrets)`; err == nil || err.Error() != want {
			t.Errorf("taking the bot's namespace out of apiKeyNamespaces: %v, want %s", err, want)
		}
		_ = k8s.Delete(ctx, withBot)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := k8s.Create(ctx, tt.tenant())
			if err == nil {
				_ = k8s.Delete(ctx, tt.tenant())
				t.Fatalf("created; want the error %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestApiKeySchemaRejectsBadObjects(t *testing.T) {
	ctx := context.Background()
	ns := "default"
	valid := func(name string) *notifyv1alpha1.ApiKey {
		return &notifyv1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: notifyv1alpha1.ApiKeySpec{Tenant: "acme"}}
	}
	creates := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"no tenant", unstructuredKey(ns, "v-no-tenant", map[string]any{}),
			`ApiKey.notify.herald.dev "v-no-tenant" is invalid: [spec.tenant: Required value, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`},
		{"tenant not a DNS label", func() client.Object { k := valid("v-bad-tenant"); k.Spec.Tenant = "Acme Corp"; return k }(),
			`ApiKey.notify.herald.dev "v-bad-tenant" is invalid: spec.tenant: Invalid value: "Acme Corp": spec.tenant in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`},
		{"label too long", func() client.Object { k := valid("v-long-label"); k.Spec.Label = strings.Repeat("x", 65); return k }(),
			`ApiKey.notify.herald.dev "v-long-label" is invalid: [spec.label: Too long: may not be more than 64 bytes, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`},
		{"label with a control character", func() client.Object { k := valid("v-ctl-label"); k.Spec.Label = "Acme\tShop"; return k }(),
			`ApiKey.notify.herald.dev "v-ctl-label" is invalid: spec.label: Invalid value: "Acme\tShop": spec.label in body should match '^[^\p{Cc}]+$'`},
		{"secretName not a DNS name", func() client.Object { k := valid("v-bad-secret"); k.Spec.SecretName = "My_Secret"; return k }(),
			`ApiKey.notify.herald.dev "v-bad-secret" is invalid: spec.secretName: Invalid value: "My_Secret": spec.secretName in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'`},
		{"negative rotation", func() client.Object {
			k := valid("v-neg-rotation")
			k.Spec.Rotation = &notifyv1alpha1.Rotation{Generation: -1}
			return k
		}(), `ApiKey.notify.herald.dev "v-neg-rotation" is invalid: spec.rotation.generation: Invalid value: -1: spec.rotation.generation in body should be greater than or equal to 0`},
		{"expiresAt not a time", unstructuredKey(ns, "v-bad-expiry", map[string]any{"tenant": "acme", "expiresAt": "tomorrow"}),
			`ApiKey.notify.herald.dev "v-bad-expiry" is invalid: [spec.expiresAt: Invalid value: "tomorrow": spec.expiresAt in body must be of type date-time: "tomorrow", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`},
	}
	for _, tt := range creates {
		t.Run(tt.name, func(t *testing.T) {
			err := k8s.Create(ctx, tt.obj)
			if err == nil {
				_ = k8s.Delete(ctx, tt.obj)
				t.Fatalf("created; want the error %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
		})
	}

	updates := []struct {
		name   string
		start  func(*notifyv1alpha1.ApiKey)
		mutate func(*notifyv1alpha1.ApiKey)
		want   string
	}{
		{"tenant changed", nil, func(k *notifyv1alpha1.ApiKey) { k.Spec.Tenant = "other" },
			`ApiKey.notify.herald.dev "v-update" is invalid: spec.tenant: Invalid value: "other": tenant is immutable`},
		{"secretName changed", func(k *notifyv1alpha1.ApiKey) { k.Spec.SecretName = "one" }, func(k *notifyv1alpha1.ApiKey) { k.Spec.SecretName = "two" },
			`ApiKey.notify.herald.dev "v-update" is invalid: spec.secretName: Invalid value: "two": secretName is immutable`},
		{"secretName removed", func(k *notifyv1alpha1.ApiKey) { k.Spec.SecretName = "one" }, func(k *notifyv1alpha1.ApiKey) { k.Spec.SecretName = "" },
			`ApiKey.notify.herald.dev "v-update" is invalid: spec: Invalid value: secretName cannot be removed once set`},
		{"rotation decreased", func(k *notifyv1alpha1.ApiKey) { k.Spec.Rotation = &notifyv1alpha1.Rotation{Generation: 3} },
			func(k *notifyv1alpha1.ApiKey) { k.Spec.Rotation.Generation = 2 },
			`ApiKey.notify.herald.dev "v-update" is invalid: spec: Invalid value: rotation.generation may only increase`},
		{"rotation removed", func(k *notifyv1alpha1.ApiKey) { k.Spec.Rotation = &notifyv1alpha1.Rotation{Generation: 3} },
			func(k *notifyv1alpha1.ApiKey) { k.Spec.Rotation = nil },
			`ApiKey.notify.herald.dev "v-update" is invalid: spec: Invalid value: rotation.generation may only increase`},
	}
	for _, tt := range updates {
		t.Run(tt.name, func(t *testing.T) {
			k := valid("v-update")
			if tt.start != nil {
				tt.start(k)
			}
			if err := k8s.Create(ctx, k); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = k8s.Delete(ctx, k) }()
			tt.mutate(k)
			err := k8s.Update(ctx, k)
			if err == nil {
				t.Fatalf("updated; want the error %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got %s\nwant %s", err, tt.want)
			}
		})
	}

	// What stays allowed: setting secretName once, and increasing the rotation generation.
	k := valid("v-allowed")
	if err := k8s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, k) }()
	k.Spec.SecretName = "set-later"
	k.Spec.Rotation = &notifyv1alpha1.Rotation{Generation: 1}
	if err := k8s.Update(ctx, k); err != nil {
		t.Fatalf("setting secretName and a first rotation: %v", err)
	}
	k.Spec.Rotation.Generation = 2
	k.Spec.Label = "Acme"
	k.Spec.Disabled = true
	if err := k8s.Update(ctx, k); err != nil {
		t.Fatalf("rotating, labelling, disabling: %v", err)
	}
}

// botIn is a spec.bot whose token is in a Secret of namespace ns.
func botIn(ns string) *notifyv1alpha1.TenantBot {
	return &notifyv1alpha1.TenantBot{TokenSecretRef: notifyv1alpha1.BotTokenSecretReference{Namespace: ns, Name: "acme-bot", Key: "token"}}
}

func unstructuredKey(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": notifyv1alpha1.GroupVersion.String(),
		"kind":       "ApiKey",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       spec,
	}}
	return u
}

func TestSamplesApplyCleanly(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join("..", "config", "samples", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("samples: %v %v", files, err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		objs = append(objs, u)
	}
	// Namespaces first, as kubectl apply -k orders them.
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return cmp.Compare(map[bool]int{true: 0, false: 1}[a.GetKind() == "Namespace"], map[bool]int{true: 0, false: 1}[b.GetKind() == "Namespace"])
	})
	for _, u := range objs {
		err := k8s.Create(ctx, u)
		if u.GetKind() == "Namespace" && apierrors.IsAlreadyExists(err) {
			continue // an earlier run's: envtest has no namespace controller to finish deleting one
		}
		if err != nil {
			t.Errorf("applying sample %s %s: %v", u.GetKind(), u.GetName(), err)
			continue
		}
		if u.GetKind() != "Namespace" {
			t.Cleanup(func() { _ = k8s.Delete(ctx, u) })
		}
	}
}
