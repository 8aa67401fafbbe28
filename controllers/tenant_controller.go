// Package controllers holds the operator's reconcilers: Tenant and ApiKey objects reconciled into the
// PostgreSQL key store, and a Tenant's own bot registered with the messaging platform.
package controllers

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/quiet"
	"github.com/heraldhq/herald/internal/store"
)

// TenantReconciler keeps a Tenant's row of the key store equal to its spec, registers its own bot
// (spec.bot, tenant_bot.go), shows its last day's usage in its status (tenant_usage.go), and revokes the tenant's keys and purges its end users when the Tenant is
// deleted.
type TenantReconciler struct {
	Client client.Client
	// APIReader reads the Tenant live (uncached) before its deletion's purge (see finalize), and the
	// Secret of spec.bot's token: Secrets are never cached.
	APIReader client.Reader
	Store     *store.Store
	Recorder  recorder.EventRecorder
	// ResyncPeriod is how often a reconciled Tenant is checked again, to repair changes made to the key
	// store by hand and to refresh status.activeKeys; sooner when status.usage is due (UsageRefreshPeriod).
	ResyncPeriod time.Duration
	// Bots registers the tenants' own bots; nil when the operator may not (BotsNotConfigured says why).
	Bots              *bot.Registrar
	BotsNotConfigured error
	// Secrets watches the namespaces of the bots' token Secrets; BotStates the bots' rows.
	Secrets   *SecretWatcher
	BotStates *BotStateWatcher
	// UsageRefreshPeriod is how often, at most, status.usage is refreshed (tenant_usage.go); zero:
	// DefaultUsageRefreshPeriod.
	UsageRefreshPeriod time.Duration

	botLocks [16]sync.Mutex // botLock
	// usageWritten: types.UID → time.Time, when this process last wrote a Tenant's status.usage
	// (tenant_usage.go); a Tenant's entry goes with its finalizer's purge.
	usageWritten sync.Map
}

// TenantWorkers is how many Tenants are reconciled at once. A registration of a bot waits on two round
// trips to the platform (getMe, setWebhook): one at a time, a few hundred Tenants with bots applied
// together would take minutes to become BotReady. Two Tenants naming the same bot are serialised by the
// bot's lock (botLock); everything else a reconcile writes is the Tenant's own.
const TenantWorkers = 8

// Fields the Tenants are indexed by, to find those a Secret's or a bot's change concerns.
const (
	botSecretField = "spec.bot.tokenSecretRef"
	botIDField     = "status.bot.id"
)

// +kubebuilder:rbac:groups=notify.herald.dev,resources=tenants,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=notify.herald.dev,resources=tenants/status,verbs=patch
// +kubebuilder:rbac:groups=notify.herald.dev,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the key store to the Tenant's spec.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx = audit.WithActor(ctx, audit.Operator)
	tenant := &notifyv1alpha1.Tenant{}
	if err := r.Client.Get(ctx, req.NamespacedName, tenant); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if deleting, err := finalize(ctx, r.Client, r.APIReader, tenant, r.purge); deleting {
		return ctrl.Result{}, err
	}
	if err := ensureFinalizer(ctx, r.Client, tenant, nil); err != nil {
		return ctrl.Result{}, err
	}

	orig := tenant.DeepCopy()
	result, err := r.sync(ctx, tenant)
	if !equality.Semantic.DeepEqual(orig.Status, tenant.Status) {
		if perr := r.Client.Status().Patch(ctx, tenant, client.MergeFrom(orig)); perr != nil && err == nil {
			err = fmt.Errorf("while updating the status: %w", perr)
		}
	}
	// controller-runtime logs a returned error and retries with backoff.
	return result, err
}

func (r *TenantReconciler) sync(ctx context.Context, tenant *notifyv1alpha1.Tenant) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	w, err := r.Store.UpsertTenantFromSpec(ctx, store.TenantRecord{
		ID:            tenant.Name,
		DeveloperName: tenant.Spec.DisplayName,
		Suspended:     tenant.Spec.Suspended,
		Developers:    tenant.KeyStoreDevelopers(),
		Limits:        keyStoreLimits(tenant.Spec.Limits),
		Incarnation:   string(tenant.UID),
	})
	if err != nil {
		tenant.SetAsFailed(notifyv1alpha1.ReasonKeyStoreUnavailable, "the key store is unavailable: "+err.Error())
		return ctrl.Result{}, fmt.Errorf("while writing tenant %s to the key store: %w", tenant.Name, err)
	}
	if w.Reincarnated {
		logger.Info("the key store held an earlier Tenant of this name: purged it", "revokedKeys", w.Purge.RevokedKeys,
			"users", w.Purge.Users, "idempotencyKeys", w.Purge.IdempotencyKeys, "callbackEndpoints", w.Purge.CallbackEndpoints)
		if w.Purge != (store.TenantPurge{}) {
			// The finalizer purges on deletion; finding something here means the earlier Tenant went
			// without it (finalizer removed by hand) or something was written after its purge.
			r.Recorder.Eventf(tenant, nil, corev1.EventTypeWarning, "PreviousTenantPurged", "Purge",
				"the key store held data of an earlier Tenant named %s (deleted without the operator's finalizer?): "+
					"revoked %d key(s), removed %d user(s) with their links and verifications, and %d idempotency key(s)",
				tenant.Name, w.Purge.RevokedKeys, w.Purge.Users, w.Purge.IdempotencyKeys)
		}
	}
	if w.Wrote {
		logger.Info("tenant written to the key store", "suspended", tenant.Spec.Suspended)
	}
	hours, err := keyStoreQuietHours(tenant.Spec.QuietHours)
	if err != nil {
		// The spec must change: nothing to retry.
		tenant.SetAsFailed(notifyv1alpha1.ReasonInvalidQuietHours, err.Error())
		return ctrl.Result{}, nil
	}
	changed, err := r.Store.SetTenantQuietHours(ctx, tenant.Name, hours)
	if err != nil {
		tenant.SetAsFailed(notifyv1alpha1.ReasonKeyStoreUnavailable, "the key store is unavailable: "+err.Error())
		return ctrl.Result{}, fmt.Errorf("while writing the quiet hours of tenant %s: %w", tenant.Name, err)
	}
	if changed {
		logger.Info("quiet hours written to the key store", "quietHours", tenant.Spec.QuietHours)
	}
	active, err := r.Store.CountActiveKeys(ctx, tenant.Name)
	if err != nil {
		tenant.SetAsFailed(notifyv1alpha1.ReasonKeyStoreUnavailable, "the key store is unavailable: "+err.Error())
		return ctrl.Result{}, fmt.Errorf("while counting the keys of tenant %s: %w", tenant.Name, err)
	}
	// The tenant is in the key store whatever becomes of its bot: its ApiKeys mint (they wait for
	// observedGeneration), and BotReady says for which generation its bot is what spec.bot says.
	tenant.SetAsSynced(int32(min(active, math.MaxInt32)))
	requeue, err := r.syncBot(ctx, tenant)
	if err != nil {
		return ctrl.Result{}, err
	}
	if requeue == 0 || requeue > r.ResyncPeriod {
		requeue = r.ResyncPeriod
	}
	refresh, err := r.syncUsage(ctx, tenant, time.Now())
	if err != nil {
		return ctrl.Result{}, err
	}
	requeue = min(requeue, refresh)
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// purge runs when the Tenant is deleted, before its finalizer goes: every key of the tenant is revoked
// and the tenant suspended (one transaction), then its end users, with their links, link tokens and phone
// verifications, and its idempotency keys are deleted in batches. A Tenant re-created under the same
// name starts empty, and notifications still queued for the tenant find no link and end unlinked.
func (r *TenantReconciler) purge(ctx context.Context, tenant *notifyv1alpha1.Tenant) error {
	n, err := r.Store.RevokeTenantKeys(ctx, tenant.Name)
	if err != nil {
		return fmt.Errorf("while revoking the keys of deleted tenant %s: %w", tenant.Name, err)
	}
	p, err := r.Store.PurgeTenantUsers(ctx, tenant.Name)
	if err != nil {
		return fmt.Errorf("while purging the users of deleted tenant %s: %w", tenant.Name, err)
	}
	if err := r.dropBot(ctx, tenant); err != nil {
		return err
	}
	r.usageWritten.Delete(tenant.UID)
	log.FromContext(ctx).Info("tenant deleted: keys revoked, users purged", "revoked", n, "users", p.Users, "idempotencyKeys", p.IdempotencyKeys,
		"callbackEndpoints", p.CallbackEndpoints)
	r.Recorder.Eventf(tenant, nil, corev1.EventTypeNormal, "KeysRevoked", "Delete",
		"tenant deleted: revoked %d key(s) in the key store and removed %d user(s) with their links, link tokens and phone verifications",
		n, p.Users)
	return nil
}

// SetupWithManager registers the reconciler. ApiKey changes requeue their Tenant, whose status counts the
// active keys; a change of a bot's token Secret (r.Secrets) or of a bot's row (r.BotStates) requeues the
// Tenants of that Secret or bot.
func (r *TenantReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts ControllerOptions) error {
	indexes := map[string]func(*notifyv1alpha1.Tenant) string{
		botSecretField: (*notifyv1alpha1.Tenant).BotTokenSecret,
		botIDField: func(t *notifyv1alpha1.Tenant) string {
			if t.Status.Bot == nil {
				return ""
			}
			return t.Status.Bot.ID
		},
	}
	for field, value := range indexes {
		if err := mgr.GetFieldIndexer().IndexField(ctx, &notifyv1alpha1.Tenant{}, field, func(obj client.Object) []string {
			if v := value(obj.(*notifyv1alpha1.Tenant)); v != "" {
				return []string{v}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("while indexing Tenants by %s: %w", field, err)
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&notifyv1alpha1.Tenant{}).
		Watches(&notifyv1alpha1.ApiKey{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, obj client.Object) []reconcile.Request {
				key, ok := obj.(*notifyv1alpha1.ApiKey)
				if !ok {
					return nil
				}
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: key.Spec.Tenant}}}
			})).
		WatchesRawSource(source.Channel(r.Secrets.BotEvents(), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, obj client.Object) []reconcile.Request {
				return r.tenantsBy(ctx, botSecretField, obj.GetNamespace()+"/"+obj.GetName())
			}))).
		WatchesRawSource(source.Channel(r.BotStates.Events(), handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, obj client.Object) []reconcile.Request {
				return r.tenantsBy(ctx, botIDField, obj.GetName())
			}))).
		WithOptions(opts.controller(TenantWorkers)).
		Named("tenant").
		Complete(r)
}

// tenantsBy lists the Tenants whose indexed field has value.
func (r *TenantReconciler) tenantsBy(ctx context.Context, field, value string) []reconcile.Request {
	var tenants notifyv1alpha1.TenantList
	if err := r.Client.List(ctx, &tenants, client.MatchingFields{field: value}); err != nil {
		log.FromContext(ctx).Error(err, "while listing Tenants", field, value)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(tenants.Items))
	for _, t := range tenants.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: t.Name}})
	}
	return reqs
}

// keyStoreQuietHours are spec.quietHours as the key store keeps them (nil: none), checked as the admin
// CLI checks them.
func keyStoreQuietHours(q *notifyv1alpha1.TenantQuietHours) (*quiet.Hours, error) {
	if q == nil {
		return nil, nil
	}
	mode := q.Mode
	if mode == "" {
		mode = string(quiet.Hold)
	}
	h, err := quiet.Parse(q.Start+"-"+q.End, q.TimeZone, mode)
	if err != nil {
		return nil, fmt.Errorf("spec.quietHours: %w", err)
	}
	return &h, nil
}

// keyStoreLimits are spec.limits as the key store keeps them (nil: the installation's default).
func keyStoreLimits(l *notifyv1alpha1.TenantLimits) store.TenantLimits {
	if l == nil {
		return store.TenantLimits{}
	}
	return store.TenantLimits{SendsPerSecond: l.SendsPerSecond, Burst: l.Burst, RequestsPerSecond: l.RequestsPerSecond,
		DeliveryWeight: l.DeliveryWeight}
}
