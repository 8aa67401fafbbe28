package controllers_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/kubetest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/syncbuf"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// One API server (envtest: real kube-apiserver and etcd, with the CRDs of config/crd/bases) for the
// package; each test runs its own operator manager over its own fresh database, in its own namespace.
var (
	restConfig *rest.Config
	k8s        client.Client // uncached: what kubectl would see
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	os.Exit(kubetest.Run(m, func(cfg *rest.Config, c client.Client) { restConfig, k8s = cfg, c }))
}

// randomSuffix makes names unique to a test: six hex digits.
func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// harness is one running operator over a fresh database.
type harness struct {
	t       *testing.T
	ctx     context.Context
	st      *store.Store
	fx      *fixture.F
	dbURL   string
	ns      string
	suffix  string
	tenants []string
	// logs is the running operator's log.
	logs *syncbuf.Buffer
	// stop stops the running manager and waits for it.
	stop func()
}

// start runs the real manager (both reconcilers) with opts, as envtest's admin unless opts.RestConfig
// says otherwise; the resync and grace default to short test values. Everything the test created through
// the harness is deleted (finalizers included) before the manager stops.
func start(t *testing.T, opts operator.Options) *harness {
	t.Helper()
	st, url := pgtest.NewStore(t)
	h := &harness{t: t, ctx: context.Background(), st: st, fx: fixture.New(st), dbURL: url, suffix: randomSuffix()}
	h.run(opts)
	h.ns = "ns-" + h.suffix
	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}})
	t.Cleanup(func() {
		h.cleanup()
		h.stop()
	})
	return h
}

// run starts a manager over the harness's database; h.stop stops it. A test may stop the operator and
// run a new one (a restart: a new process with cold caches).
func (h *harness) run(opts operator.Options) {
	h.t.Helper()
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = time.Second
	}
	if opts.RotationGracePeriod == 0 {
		opts.RotationGracePeriod = time.Hour
	}
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.SkipControllerNameValidation = true
	// The operator's log, kept at Info and shown only when the test fails: what each reconcile did is how a
	// failure that depends on timing is understood.
	var logs syncbuf.Buffer
	h.logs = &logs
	opts.Logger = logr.FromSlogHandler(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h.t.Cleanup(func() {
		if h.t.Failed() {
			out := logs.String()
			h.t.Logf("the operator's log:\n%s", out[max(0, len(out)-64<<10):])
		}
	})
	cfg := restConfig
	if opts.RestConfig != nil {
		cfg = opts.RestConfig // the operator as a ServiceAccount (internal/testing/rbactest)
	}
	mgr, err := operator.NewManager(cfg, h.st, opts)
	if err != nil {
		h.t.Fatalf("creating the manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("manager stopped with an error: %v", err)
			}
		})
	}
}

func (h *harness) cleanup() {
	ctx := h.ctx
	_ = k8s.DeleteAllOf(ctx, &notifyv1alpha1.ApiKey{}, client.InNamespace(h.ns))
	for _, name := range h.tenants {
		_ = k8s.Delete(ctx, &notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		var keys notifyv1alpha1.ApiKeyList
		_ = k8s.List(ctx, &keys, client.InNamespace(h.ns))
		left := len(keys.Items)
		for _, name := range h.tenants {
			if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &notifyv1alpha1.Tenant{}); err == nil {
				left++
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.t.Errorf("cleanup: objects of %s still present after 15s (finalizers not removed)", h.ns)
	// Unblock the next tests anyway.
	var keys notifyv1alpha1.ApiKeyList
	_ = k8s.List(ctx, &keys, client.InNamespace(h.ns))
	for i := range keys.Items {
		_ = k8s.Patch(ctx, &keys.Items[i], client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	}
	for _, name := range h.tenants {
		_ = k8s.Patch(ctx, &notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	}
}

func (h *harness) create(obj client.Object) {
	h.t.Helper()
	if err := k8s.Create(h.ctx, obj); err != nil {
		h.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// tenant creates a Tenant with a name unique to the test (name + suffix) that lists the test namespace.
func (h *harness) tenant(name string, mutate ...func(*notifyv1alpha1.Tenant)) *notifyv1alpha1.Tenant {
	h.t.Helper()
	tn := &notifyv1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + h.suffix},
		Spec:       notifyv1alpha1.TenantSpec{DisplayName: "Acme Corp", ApiKeyNamespaces: []string{h.ns}},
	}
	for _, m := range mutate {
		m(tn)
	}
	h.tenants = append(h.tenants, tn.Name)
	h.create(tn)
	return tn
}

func (h *harness) apiKey(name, tenant string, mutate ...func(*notifyv1alpha1.ApiKey)) *notifyv1alpha1.ApiKey {
	h.t.Helper()
	k := &notifyv1alpha1.ApiKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
		Spec:       notifyv1alpha1.ApiKeySpec{Tenant: tenant},
	}
	for _, m := range mutate {
		m(k)
	}
	h.create(k)
	return k
}

// activeKey creates Tenant acme and its ApiKey app, waits until the key is active, and returns them with
// the key the operator minted into the ApiKey's Secret.
func (h *harness) activeKey() (*notifyv1alpha1.Tenant, *notifyv1alpha1.ApiKey, string) {
	h.t.Helper()
	tn := h.tenant("acme")
	key := h.apiKey("app", tn.Name)
	h.waitKey(key, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	return tn, key, h.secretKey(key)
}

// deleteAndWait deletes obj and waits until it is gone: until the operator's finalizer has done its work.
func (h *harness) deleteAndWait(obj client.Object) {
	h.t.Helper()
	if err := k8s.Delete(h.ctx, obj); err != nil {
		h.t.Fatalf("deleting %T %s: %v", obj, obj.GetName(), err)
	}
	wait.For(h.t, 10*time.Second, fmt.Sprintf("%T %s gone", obj, obj.GetName()), func() error {
		if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(obj), obj); !isNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// update re-reads obj, applies mutate and writes it, retrying on conflicts.
func update[T client.Object](h *harness, obj T, mutate func(T)) {
	h.t.Helper()
	wait.For(h.t, 10*time.Second, "update "+obj.GetName(), func() error {
		if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return k8s.Update(h.ctx, obj)
	})
}

func (h *harness) getKey(k *notifyv1alpha1.ApiKey) *notifyv1alpha1.ApiKey {
	h.t.Helper()
	out := &notifyv1alpha1.ApiKey{}
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(k), out); err != nil {
		h.t.Fatalf("get ApiKey %s: %v", k.Name, err)
	}
	return out
}

func (h *harness) getTenant(name string) *notifyv1alpha1.Tenant {
	h.t.Helper()
	out := &notifyv1alpha1.Tenant{}
	if err := k8s.Get(h.ctx, client.ObjectKey{Name: name}, out); err != nil {
		h.t.Fatalf("get Tenant %s: %v", name, err)
	}
	return out
}

// condition checks one condition of a condition list against status and reason, and that it is
// for generation.
func condition(conds []metav1.Condition, generation int64, condType string, status metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(conds, condType)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition in %+v", condType, conds)
	case c.Status != status || c.Reason != reason:
		return fmt.Errorf("%s = %s/%s (%q), want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
	case c.ObservedGeneration != generation:
		return fmt.Errorf("%s is for generation %d, want %d", condType, c.ObservedGeneration, generation)
	}
	return nil
}

// waitKey waits until the ApiKey's Ready condition has status and reason for its current generation and
// returns the object.
func (h *harness) waitKey(k *notifyv1alpha1.ApiKey, status metav1.ConditionStatus, reason string) *notifyv1alpha1.ApiKey {
	h.t.Helper()
	var got *notifyv1alpha1.ApiKey
	wait.For(h.t, 10*time.Second, "ApiKey "+k.Name+" Ready="+string(status)+"/"+reason, func() error {
		got = &notifyv1alpha1.ApiKey{}
		if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(k), got); err != nil {
			return err
		}
		return condition(got.Status.Conditions, got.Generation, notifyv1alpha1.ConditionReady, status, reason)
	})
	return got
}

func (h *harness) waitTenant(name string, status metav1.ConditionStatus, reason string) *notifyv1alpha1.Tenant {
	h.t.Helper()
	var got *notifyv1alpha1.Tenant
	wait.For(h.t, 10*time.Second, "Tenant "+name+" Ready="+string(status)+"/"+reason, func() error {
		got = &notifyv1alpha1.Tenant{}
		if err := k8s.Get(h.ctx, client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		if got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
		}
		return condition(got.Status.Conditions, got.Generation, notifyv1alpha1.ConditionReady, status, reason)
	})
	return got
}

// secret returns the Secret of an ApiKey (its spec.secretName, defaulted to its name).
func (h *harness) secret(k *notifyv1alpha1.ApiKey) *corev1.Secret {
	h.t.Helper()
	name := k.Spec.SecretName
	if name == "" {
		name = k.Name
	}
	s := &corev1.Secret{}
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, s); err != nil {
		h.t.Fatalf("get Secret %s: %v", name, err)
	}
	return s
}

func (h *harness) secretKey(k *notifyv1alpha1.ApiKey) string {
	h.t.Helper()
	return string(h.secret(k).Data[notifyv1alpha1.SecretKeyAPIKey])
}

// usable reports whether the key authenticates against the key store, with the API's own rule.
func (h *harness) usable(secret string) bool {
	h.t.Helper()
	_, err := h.st.Authenticate(h.ctx, apikey.Digest(secret))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		h.t.Fatalf("authenticate: %v", err)
	}
	return err == nil
}

func (h *harness) waitUsable(secret string, want bool, within time.Duration) {
	h.t.Helper()
	wait.For(h.t, within, fmt.Sprintf("key %s usable=%v", secret[:apikey.PrefixLen], want), func() error {
		if got := h.usable(secret); got != want {
			return fmt.Errorf("usable = %v", got)
		}
		return nil
	})
}

// keyRow is a row of api_keys, as a test reads it.
type keyRow struct {
	ID        string
	TenantID  string
	Prefix    string
	Label     *string
	OwnerRef  *string
	Disabled  bool
	ExpiresAt *time.Time
	RevokedAt *time.Time
	UpdatedAt time.Time
	Xmin      string
}

func (h *harness) keyRow(secret string) keyRow {
	h.t.Helper()
	var r keyRow
	d := apikey.Digest(secret)
	err := h.st.Pool().QueryRow(h.ctx, `
SELECT id::text, tenant_id, prefix, label, owner_ref, disabled, expires_at, revoked_at, updated_at, xmin::text
  FROM api_keys WHERE digest = $1`, d[:]).Scan(&r.ID, &r.TenantID, &r.Prefix, &r.Label, &r.OwnerRef, &r.Disabled, &r.ExpiresAt, &r.RevokedAt, &r.UpdatedAt, &r.Xmin)
	if err != nil {
		h.t.Fatalf("reading the key row of %s: %v", secret[:apikey.PrefixLen], err)
	}
	return r
}

func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	if _, err := h.st.Pool().Exec(h.ctx, sql, args...); err != nil {
		h.t.Fatalf("exec %q: %v", sql, err)
	}
}

// events returns the events about the object, oldest first.
func (h *harness) events(obj client.Object) []eventsv1.Event {
	h.t.Helper()
	var list eventsv1.EventList
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	if err := k8s.List(h.ctx, &list, client.InNamespace(ns)); err != nil {
		h.t.Fatalf("listing events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == obj.GetName() && e.Regarding.UID == obj.GetUID() {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for an event of type and reason about obj whose note contains text.
func (h *harness) waitEvent(obj client.Object, eventType, reason, text string) {
	h.t.Helper()
	wait.For(h.t, 10*time.Second, fmt.Sprintf("%s event %s about %s", eventType, reason, obj.GetName()), func() error {
		evs := h.events(obj)
		for _, e := range evs {
			if e.Type == eventType && e.Reason == reason && strings.Contains(e.Note, text) {
				return nil
			}
		}
		var seen []string
		for _, e := range evs {
			seen = append(seen, e.Type+"/"+e.Reason+": "+e.Note)
		}
		return fmt.Errorf("events seen: %q", seen)
	})
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// reconcileCount is the number of reconciles the operator's controllers ran in this process.
func reconcileCount(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && (l.GetValue() == "apikey" || l.GetValue() == "tenant") {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// waitIdle waits until the Tenant controller has run no reconcile, and has none running, for a few polls
// (its own reconciles of its last status writes have passed), so that what happens next is the doing of
// what the test does next. The work queue's depth is no measure: its gauge is shared by every manager
// the test binary ran, and one stopped with items queued leaves it above zero for good.
func waitIdle(t *testing.T) {
	t.Helper()
	quiet, last := 0, -1.0
	wait.For(t, 10*time.Second, "the Tenant controller idle", func() error {
		families, err := metrics.Registry.Gather()
		if err != nil {
			return err
		}
		running, reconciles := 0.0, 0.0
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() != "controller" || l.GetValue() != "tenant" {
						continue
					}
					switch f.GetName() {
					case "controller_runtime_active_workers":
						running += m.GetGauge().GetValue()
					case "controller_runtime_reconcile_total":
						reconciles += m.GetCounter().GetValue()
					}
				}
			}
		}
		if running > 0 || reconciles != last {
			quiet, last = 0, reconciles
			return fmt.Errorf("%.0f running, %.0f reconciles so far", running, reconciles)
		}
		if quiet++; quiet < 10 {
			return fmt.Errorf("idle for %d polls only", quiet)
		}
		return nil
	})
}
