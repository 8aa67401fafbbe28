package controllers

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/usage"
)

// DefaultUsageRefreshPeriod is how often, at most, a Tenant's status.usage is read and written.
const DefaultUsageRefreshPeriod = time.Minute

// syncUsage refreshes tenant's status.usage from the usage counts (the tenant's hour rows of the last day,
// store.UsageSince: never a scan of the notifications) once UsageRefreshPeriod has passed since it was
// last written, and changes it only when the counts or the hours they span changed: a Tenant is written at
// most once a period, and an idle one about once an hour (since moves). Reconciles in between — a spec
// change, a key's, the resync — leave it alone. It returns how long until the next refresh is due.
func (r *TenantReconciler) syncUsage(ctx context.Context, tenant *notifyv1alpha1.Tenant, now time.Time) (time.Duration, error) {
	period := r.UsageRefreshPeriod
	if period <= 0 {
		period = DefaultUsageRefreshPeriod
	}
	old := tenant.Status.Usage
	last := r.usageWrittenAt(tenant)
	if old != nil && old.UpdatedAt.After(last) {
		last = old.UpdatedAt.Time
	}
	// An updatedAt in the future by more than a period (another replica's clock) is not waited for.
	if wait := period - now.Sub(last); !last.IsZero() && wait > 0 && wait <= period {
		return wait, nil
	}
	since := usage.LastDaySince(now)
	c, err := r.Store.UsageSince(ctx, tenant.Name, since)
	if err != nil {
		return 0, fmt.Errorf("while reading the usage of tenant %s: %w", tenant.Name, err)
	}
	if old != nil && old.Accepted24h == c.Accepted && old.Delivered24h == c.Delivered && old.Since.Time.Equal(since) {
		return period, nil
	}
	r.usageWritten.Store(tenant.UID, now)
	tenant.Status.Usage = &notifyv1alpha1.TenantUsageStatus{
		Accepted24h:  c.Accepted,
		Delivered24h: c.Delivered,
		Since:        metav1.NewTime(since),
		UpdatedAt:    metav1.NewMicroTime(now),
	}
	return period, nil
}

// usageWrittenAt is when this process last wrote tenant's status.usage (zero: never). The Tenant a
// reconcile reads comes from the informer's cache, which may not hold the status this process patched a
// moment ago: going by status.updatedAt alone, the reconcile that the patch's own watch event (or a
// spec's, a key's) queues could find no usage and write it again at once. A restarted operator goes by
// status.updatedAt. Keyed by UID, so that a Tenant re-created under the same name starts afresh.
func (r *TenantReconciler) usageWrittenAt(tenant *notifyv1alpha1.Tenant) time.Time {
	if v, ok := r.usageWritten.Load(tenant.UID); ok {
		return v.(time.Time)
	}
	return time.Time{}
}
