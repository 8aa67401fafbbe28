// Package controllers holds the operator's reconcilers: Tenant and ApiKey objects reconciled into the
// PostgreSQL key store.
package controllers

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/store"
)

// TenantReconciler keeps a Tenant's row of the key store equal to its spec and revokes the tenant's keys
// when the Tenant is deleted.
type TenantReconciler struct {
	Client   client.Client
	Store    *store.Store
	Recorder recorder.EventRecorder
	// ResyncPeriod is how often a reconciled Tenant is checked again, to repair changes made to the key
	// store by hand and to refresh status.activeKeys.
	ResyncPeriod time.Duration
}

// +kubebuilder:rbac:groups=notify.herald.dev,resources=tenants,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=notify.herald.dev,resources=tenants/status,verbs=patch
// +kubebuilder:rbac:groups=notify.herald.dev,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the key store to the Tenant's spec.
func (r *TenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tenant := &notifyv1alpha1.Tenant{}
	if err := r.Client.Get(ctx, req.NamespacedName, tenant); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if deleting, err := finalize(ctx, r.Client, tenant, r.revokeKeys); deleting {
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
	wrote, err := r.Store.UpsertTenantFromSpec(ctx, store.TenantRecord{
		ID:            tenant.Name,
		DeveloperName: tenant.Spec.DisplayName,
		Suspended:     tenant.Spec.Suspended,
		Developers:    tenant.KeyStoreDevelopers(),
	})
	if err != nil {
		tenant.SetAsFailed(notifyv1alpha1.ReasonKeyStoreUnavailable, "the key store is unavailable: "+err.Error())
		return ctrl.Result{}, fmt.Errorf("while writing tenant %s to the key store: %w", tenant.Name, err)
	}
	if wrote {
		log.FromContext(ctx).Info("tenant written to the key store", "suspended", tenant.Spec.Suspended)
	}
	active, err := r.Store.CountActiveKeys(ctx, tenant.Name)
	if err != nil {
		tenant.SetAsFailed(notifyv1alpha1.ReasonKeyStoreUnavailable, "the key store is unavailable: "+err.Error())
		return ctrl.Result{}, fmt.Errorf("while counting the keys of tenant %s: %w", tenant.Name, err)
	}
	tenant.SetAsSynced(int32(min(active, math.MaxInt32)))
	return ctrl.Result{RequeueAfter: r.ResyncPeriod}, nil
}

func (r *TenantReconciler) revokeKeys(ctx context.Context, tenant *notifyv1alpha1.Tenant) error {
	n, err := r.Store.RevokeTenantKeys(ctx, tenant.Name)
	if err != nil {
		return fmt.Errorf("while revoking the keys of deleted tenant %s: %w", tenant.Name, err)
	}
	log.FromContext(ctx).Info("tenant deleted: keys revoked", "revoked", n)
	r.Recorder.Eventf(tenant, nil, corev1.EventTypeNormal, "KeysRevoked", "Delete",
		"tenant deleted: revoked %d key(s) in the key store", n)
	return nil
}

// SetupWithManager registers the reconciler. ApiKey changes requeue their Tenant, whose status counts the
// active keys.
func (r *TenantReconciler) SetupWithManager(mgr ctrl.Manager, opts ControllerOptions) error {
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
		WithOptions(opts.controller()).
		Named("tenant").
		Complete(r)
}
