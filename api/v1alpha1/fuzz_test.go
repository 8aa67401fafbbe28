package v1alpha1_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
)

// FuzzApiKeySpec feeds ApiKeys, decoded from JSON as the API server hands them over, to every helper the
// operator interprets their spec with, at any time, and checks what the reconciler relies on: the owner
// ref of the key store names this ApiKey and nothing else, the Secret name is the spec's or the default,
// a key minted for the current rotation generation does not ask for another rotation, and the next check
// of an expiring key comes after its expiry and within the resync period. `go test` runs the seeds; `make
// fuzz` searches further.
func FuzzApiKeySpec(f *testing.F) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	for _, seed := range []struct {
		obj      string
		recorded string
		ref      string
	}{
		{`{"metadata":{"namespace":"shop","name":"shop-backend"},"spec":{"tenant":"acme-shop","label":"Acme Shop","secretName":"shop-backend-herald","rotation":{"generation":0}}}`, "0", "k8s:shop/shop-backend"},
		{`{"metadata":{"namespace":"shop","name":"app"},"spec":{"tenant":"acme","expiresAt":"2026-05-01T12:00:30Z"}}`, "", "k8s:shop/app"},
		{`{"metadata":{"namespace":"shop","name":"app"},"spec":{"tenant":"acme","expiresAt":"9999-12-31T23:59:59Z"}}`, "3", "k8s:/app"},
		{`{"metadata":{"namespace":"shop","name":"app"},"spec":{"tenant":"acme","expiresAt":"1970-01-01T00:00:00Z","disabled":true}}`, "x", "k8s:shop/"},
		{`{"metadata":{"namespace":"a","name":"b.c"},"spec":{"tenant":"t","rotation":{"generation":9223372036854775807}}}`, "9223372036854775806", "k8s:a/b/c"},
		{`{"metadata":{"namespace":"a","name":"b"},"spec":{"tenant":"t","rotation":{"generation":-1}}}`, "-2", "K8S:a/b"},
		{`{"metadata":{"name":"no-namespace"},"spec":{}}`, "+1", "k8s:Shop/app"},
		{`{}`, "", ""},
	} {
		f.Add([]byte(seed.obj), now, uint32(300), seed.recorded, seed.ref)
	}
	f.Fuzz(func(t *testing.T, obj []byte, nowNanos int64, limitSeconds uint32, recorded, ref string) {
		var k notifyv1alpha1.ApiKey
		if err := json.Unmarshal(obj, &k); err != nil {
			t.Skip()
		}
		now := time.Unix(0, nowNanos).UTC()
		limit := time.Duration(limitSeconds%86400+1) * time.Second

		if ns, name, ok := notifyv1alpha1.ParseOwnerRef(k.OwnerRef()); ok && (ns != k.Namespace || name != k.Name) {
			t.Errorf("ParseOwnerRef(%q) = %q, %q: not the ApiKey %s/%s", k.OwnerRef(), ns, name, k.Namespace, k.Name)
		}
		if ns, name, ok := notifyv1alpha1.ParseOwnerRef(ref); ok {
			back := (&notifyv1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}).OwnerRef()
			if back != ref || ns == "" || name == "" {
				t.Errorf("ParseOwnerRef(%q) = %q, %q, whose owner ref is %q", ref, ns, name, back)
			}
		}

		want := k.Spec.SecretName
		if want == "" {
			want = k.Name
		}
		if got := k.SecretNameOrDefault(); got != want {
			t.Errorf("SecretNameOrDefault() = %q, want %q", got, want)
		}

		if k.RotationDue(k.FormatRotation()) {
			t.Errorf("a key minted for rotation generation %s asks for another rotation", k.FormatRotation())
		}
		k.RotationDue(recorded) // any annotation a user may have written: no panic

		expired := k.IsExpired(metav1.NewTime(now))
		if wantExpired := k.Spec.ExpiresAt != nil && !k.Spec.ExpiresAt.After(now); expired != wantExpired {
			t.Errorf("IsExpired(%s) = %v with expiresAt %v", now, expired, k.Spec.ExpiresAt)
		}
		d := k.ExpiryCheckAfter(now, limit)
		if d <= 0 || d > limit {
			t.Fatalf("ExpiryCheckAfter(%s, %s) = %s with expiresAt %v: want a delay in (0, %s]", now, limit, d, k.Spec.ExpiresAt, limit)
		}
		if !expired && k.Spec.ExpiresAt != nil && d < limit && !now.Add(d).After(k.Spec.ExpiresAt.Time) {
			t.Errorf("ExpiryCheckAfter(%s) = %s: looks again at %s, before the expiry at %s", now, d, now.Add(d), k.Spec.ExpiresAt.Time)
		}
	})
}

// FuzzTenantSpec does the same for Tenants: the developers reach the key store as a sorted set of the
// spec's ids, and a namespace is allowed exactly when spec.apiKeyNamespaces lists it.
func FuzzTenantSpec(f *testing.F) {
	for _, seed := range []struct{ obj, ns string }{
		{`{"metadata":{"name":"acme-shop"},"spec":{"displayName":"Acme Shop","developers":[123456789],"apiKeyNamespaces":["shop"]}}`, "shop"},
		{`{"metadata":{"name":"acme"},"spec":{"displayName":"Acme","developers":[42,7,42,-1,0],"apiKeyNamespaces":["a","a",""]}}`, ""},
		{`{"metadata":{"name":"acme"},"spec":{"displayName":"Acme","suspended":true,"developers":[9223372036854775807,-9223372036854775808]}}`, "shop"},
		{`{"spec":{"developers":null,"apiKeyNamespaces":null}}`, "x"},
	} {
		f.Add([]byte(seed.obj), seed.ns)
	}
	f.Fuzz(func(t *testing.T, obj []byte, ns string) {
		var tn notifyv1alpha1.Tenant
		if err := json.Unmarshal(obj, &tn); err != nil {
			t.Skip()
		}
		devs := tn.KeyStoreDevelopers()
		if devs == nil {
			t.Error("KeyStoreDevelopers() = nil; the key store column is NOT NULL")
		}
		for i, d := range devs {
			if i > 0 && devs[i-1] >= d {
				t.Fatalf("KeyStoreDevelopers() = %v: not strictly increasing", devs)
			}
			if !slices.Contains(tn.Spec.Developers, d) {
				t.Errorf("KeyStoreDevelopers() has %d, which spec.developers %v lacks", d, tn.Spec.Developers)
			}
		}
		for _, d := range tn.Spec.Developers {
			if !slices.Contains(devs, d) {
				t.Errorf("KeyStoreDevelopers() = %v lost %d of spec.developers", devs, d)
			}
		}
		if got, want := tn.AllowsNamespace(ns), slices.Contains(tn.Spec.ApiKeyNamespaces, ns); got != want {
			t.Errorf("AllowsNamespace(%q) = %v with apiKeyNamespaces %q", ns, got, tn.Spec.ApiKeyNamespaces)
		}
	})
}
