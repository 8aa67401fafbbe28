package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Finalizer is the one finalizer of the operator: an object carrying it has state in the key store that
// must be revoked before the object goes.
const Finalizer = "notify.herald.dev/key-store"

// finalize runs cleanup for an object being deleted and then removes the finalizer, letting the object
// go. It reports whether the object is being deleted (the caller then stops). A cleanup error keeps the
// finalizer, so deletion waits for the key store and is retried with backoff.
func finalize[T client.Object](ctx context.Context, c client.Client, obj T, cleanup func(context.Context, T) error) (bool, error) {
	if obj.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return true, nil
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
