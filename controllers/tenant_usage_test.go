package controllers_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/testing/wait"
	"github.com/heraldhq/herald/internal/usage"
)

// waitUsage waits until the Tenant's status.usage counts accepted and delivered, and returns it.
func (h *harness) waitUsage(name string, accepted, delivered int64) notifyv1alpha1.TenantUsageStatus {
	h.t.Helper()
	var got notifyv1alpha1.TenantUsageStatus
	wait.For(h.t, 15*time.Second, fmt.Sprintf("Tenant %s usage %d/%d", name, accepted, delivered), func() error {
		u := h.getTenant(name).Status.Usage
		if u == nil {
			return fmt.Errorf("no status.usage")
		}
		got = *u
		if u.Accepted24h != accepted || u.Delivered24h != delivered {
			return fmt.Errorf("usage %d/%d", u.Accepted24h, u.Delivered24h)
		}
		return nil
	})
	return got
}

// A Tenant's status shows the last day's accepted and delivered counts of its tenant, summed from the usage
// counts (the hours of the last day only, its tenant's only). They are written with the first reconcile,
// then left alone by the reconciles of the next minute — a spec change among them, whose condition writes
// go through the same status patch — and refreshed once the refresh period has passed: the operator is
// restarted with a period of a second, which the test can wait for.
func TestTenantStatusShowsTheLastDaysUsageAtMostOncePerPeriod(t *testing.T) {
	h := start(t, operator.Options{}) // the default refresh period: a minute
	tn := h.tenant("acme")
	first := h.waitUsage(tn.Name, 0, 0)
	if since := usage.LastDaySince(first.UpdatedAt.Time); !first.Since.Time.Equal(since) {
		t.Errorf("since %s, want %s (the 24 hours ending with updatedAt's)", first.Since.Time, since)
	}

	now := time.Now().UTC().Truncate(time.Hour)
	h.fx.UsageHour(t, tn.Name, now, 3, 1)
	h.fx.UsageHour(t, tn.Name, now.Add(-time.Hour), 2, 2)
	h.fx.UsageHour(t, tn.Name, now.Add(-30*time.Hour), 100, 100) // older than the last day
	h.fx.UsageHour(t, "other-"+h.suffix, now, 50, 50)            // another tenant's

	// Reconciles within the minute: the resync's (a second in tests) and a spec change's.
	update(h, h.getTenant(tn.Name), func(tn *notifyv1alpha1.Tenant) { tn.Spec.DisplayName = "Acme Inc." })
	h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	time.Sleep(1500 * time.Millisecond) // a resync or more
	got := h.getTenant(tn.Name)
	if got.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d, want 2", got.Status.ObservedGeneration)
	}
	if u := got.Status.Usage; u == nil || *u != first {
		t.Errorf("within the minute status.usage became %+v, want it left as %+v", u, first)
	}

	h.stop()
	h.run(operator.Options{UsageRefreshPeriod: time.Second})
	second := h.waitUsage(tn.Name, 5, 3)
	if !second.UpdatedAt.After(first.UpdatedAt.Time) {
		t.Errorf("updatedAt %s, want after %s", second.UpdatedAt.Time, first.UpdatedAt.Time)
	}
	if since := usage.LastDaySince(second.UpdatedAt.Time); !second.Since.Time.Equal(since) {
		t.Errorf("since %s, want %s", second.Since.Time, since)
	}

	// A new count shows within about a period, and never sooner than a period after the last write.
	h.fx.UsageHour(t, tn.Name, now.Add(-2*time.Hour), 1, 0)
	third := h.waitUsage(tn.Name, 6, 3)
	if gap := third.UpdatedAt.Sub(second.UpdatedAt.Time); gap < time.Second {
		t.Errorf("status.usage rewritten %s after the last write, want at least the period (1s)", gap)
	}
	if got := h.getTenant(tn.Name); got.Status.ActiveKeys != 0 || got.Status.ObservedGeneration != 2 {
		t.Errorf("status besides usage: activeKeys %d observedGeneration %d, want 0 and 2", got.Status.ActiveKeys, got.Status.ObservedGeneration)
	}
}
