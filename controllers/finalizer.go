package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Finalizer is the one finalizer of the operator: an object carrying it has state in the key store that
// must be revoked before the object goes.
const Finalizer = "notify.herald.dev/key-store"

// finalize runs cleanup for an object being deleted and then removes the finalizer, letting the object
// go. It reports whether the object is being deleted (the caller then stops). A cleanup error keeps the
// finalizer, so deletion waits for the key store and is retried with backoff.
//
// obj comes from the informer cache, which can lag behind the API server: right after a cleanup removed
// the finalizer and the object went, another event (an ApiKey's status, say) can bring the same stale
// copy back, still carrying the finalizer. Cleaning up again then would purge by name whatever was written
// since — a re-created Tenant's first users. So the cleanup runs only when the API server itself (live,
// uncached) still holds this very object (same UID) with the finalizer.
func finalize[T client.Object](ctx context.Context, c client.Client, live client.Reader, obj T, cleanup func(context.Context, T) error) (bool, error) {
	if obj.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return true, nil
	}
	current := obj.DeepCopyObject().(T)
	if err := live.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil // cleaned up and gone already: the cache had not caught up
		}
		return true, fmt.Errorf("while reading %s live before its cleanup: %w", obj.GetName(), err)
	}
	if current.GetUID() != obj.GetUID() || !controllerutil.ContainsFinalizer(current, Finalizer) {
		return true, nil // another object of the same name, or this one's cleanup is done
	}
	if err := cleanup(ctx, obj); err != nil {
		return true, err
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(T), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := c.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil {
		return true, fmt.Errorf("while removing the finalizer: %w", err)
	}
	return true, nil
}

// ensureFinalizer adds the finalizer, together with any other change mutate makes (such as defaulting a
// spec field; mutate reports whether it changed anything), in one patch. It writes nothing when there is
// nothing to change.
func ensureFinalizer[T client.Object](ctx context.Context, c client.Client, obj T, mutate func(T) bool) error {
	orig := obj.DeepCopyObject().(T)
	changed := controllerutil.AddFinalizer(obj, Finalizer)
	if mutate != nil && mutate(obj) {
		changed = true
	}
	if !changed {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("while adding the finalizer: %w", err)
	}
	return nil
}
