package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/metric"
	"github.com/heraldhq/herald/internal/store"
)

// operatorMetrics registers with controller-runtime's registry, the one the operator serves.
var operatorMetrics = metric.With(metrics.Registry)

var (
	orphanSweeps = operatorMetrics.Counter("herald_operator_orphan_sweeps_total",
		"Sweeps of the key store for keys whose ApiKey no longer exists.")
	orphanedKeysRevoked = operatorMetrics.Counter("herald_operator_orphaned_keys_revoked_total",
		"Keys revoked because their ApiKey stayed missing for the orphan grace period.")
)

// OrphanSweeper revokes the keys of ApiKeys that no longer exist. The ApiKey's finalizer normally revokes
// them before the object goes; an ApiKey deleted with its finalizer removed by hand, or whose namespace
// was force-deleted, leaves live keys in the key store with nothing to revoke them. The sweeper finds
// them: keys whose owner_ref names an ApiKey ("k8s:<namespace>/<name>") that the API server does not
// have, seen so in every sweep for GracePeriod, are revoked. Keys made with the admin CLI (no owner_ref)
// are never looked at.
//
// It reads ApiKeys from the API server (APIReader), never from the informer cache, so a cache that has
// not synced yet (at start, after a leader change) cannot make a live ApiKey look deleted; and its
// memory of what was missing since when starts empty on every leader, so a new leader waits a full
// grace period before revoking anything.
type OrphanSweeper struct {
	APIReader   client.Reader
	Store       *store.Store
	Recorder    recorder.EventRecorder
	Log         logr.Logger
	GracePeriod time.Duration

	missing orphanTracker
}

// NeedLeaderElection is true: one sweeper in the cluster, the leader's.
func (s *OrphanSweeper) NeedLeaderElection() bool { return true }

// Interval is how often the sweeper looks: five times per grace period, at least every second and at
// most every minute.
func (s *OrphanSweeper) Interval() time.Duration {
	return min(max(s.GracePeriod/5, time.Second), time.Minute)
}

// Start sweeps every Interval until ctx ends (manager.Runnable).
func (s *OrphanSweeper) Start(ctx context.Context) error {
	s.Log.Info("sweeping for keys of deleted ApiKeys", "gracePeriod", s.GracePeriod.String(), "interval", s.Interval().String())
	tick := time.NewTicker(s.Interval())
	defer tick.Stop()
	for {
		if err := s.Sweep(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.Log.Error(err, "orphan sweep failed; trying again at the next one")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Sweep looks once: it records which owners of live keys have no ApiKey, and revokes the keys of those
// missing for the whole grace period.
func (s *OrphanSweeper) Sweep(ctx context.Context, now time.Time) error {
	ctx = audit.WithActor(ctx, audit.Operator)
	keys, err := s.Store.OperatorKeys(ctx)
	if err != nil {
		return fmt.Errorf("while listing the operator's keys: %w", err)
	}
	// After the key store was read: an owner present now had its ApiKey when its keys were seen, or got
	// it since; either way it is not an orphan.
	present, err := s.apiKeys(ctx)
	if err != nil {
		return err
	}
	orphanSweeps.Inc()
	for owner, ks := range s.missing.observe(now, keys, present, s.GracePeriod) {
		ns, name, _ := notifyv1alpha1.ParseOwnerRef(owner)
		// Last look, at this one object, before acting.
		err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &metav1.PartialObjectMetadata{TypeMeta: apiKeyType})
		if err == nil {
			s.missing.forget(owner)
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("while reading ApiKey %s/%s: %w", ns, name, err)
		}
		if err := s.revoke(ctx, owner, ns, name, ks); err != nil {
			return err
		}
	}
	return nil
}

var apiKeyType = metav1.TypeMeta{APIVersion: notifyv1alpha1.GroupVersion.String(), Kind: "ApiKey"}

// apiKeys is the set of owner refs of every ApiKey the API server has.
func (s *OrphanSweeper) apiKeys(ctx context.Context) (map[string]bool, error) {
	list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: apiKeyType.APIVersion, Kind: "ApiKeyList"}}
	if err := s.APIReader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("while listing ApiKeys: %w", err)
	}
	present := make(map[string]bool, len(list.Items))
	for _, k := range list.Items {
		present[(&notifyv1alpha1.ApiKey{ObjectMeta: k.ObjectMeta}).OwnerRef()] = true
	}
	return present, nil
}

func (s *OrphanSweeper) revoke(ctx context.Context, owner, ns, name string, keys []store.OperatorKey) error {
	ids := make([]string, 0, len(keys))
	prefixes := make([]string, 0, len(keys))
	for _, k := range keys {
		ids = append(ids, k.ID)
		prefixes = append(prefixes, k.Prefix)
	}
	n, err := s.Store.RevokeKeys(ctx, ids)
	if err != nil {
		return fmt.Errorf("while revoking the keys of deleted ApiKey %s/%s: %w", ns, name, err)
	}
	s.missing.forget(owner)
	if n == 0 {
		return nil // revoked meanwhile by someone else
	}
	orphanedKeysRevoked.Add(float64(n))
	tenantID := keys[0].TenantID
	s.Log.Info("revoked the keys of an ApiKey that no longer exists (deleted without the operator's finalizer?)",
		"apiKey", ns+"/"+name, "tenant", tenantID, "prefixes", prefixes, "missingFor", s.GracePeriod.String())
	tenant := &notifyv1alpha1.Tenant{}
	if err := s.APIReader.Get(ctx, client.ObjectKey{Name: tenantID}, tenant); err != nil {
		return client.IgnoreNotFound(err) // the log line is the record
	}
	s.Recorder.Eventf(tenant, nil, corev1.EventTypeWarning, "OrphanedKeysRevoked", "Revoke",
		"revoked %d key(s) (prefix %s) of ApiKey %s/%s, which has not existed for %s (deleted without the operator's finalizer?)",
		n, strings.Join(prefixes, ", "), ns, name, s.GracePeriod)
	return nil
}

// orphanTracker remembers, per owner ref, since when its ApiKey has been missing and which of its keys
// were live then. Only those keys are ever revoked: a key minted later belongs to a new ApiKey of the
// same name.
type orphanTracker map[string]sighting

type sighting struct {
	since time.Time
	keys  []string // ids
}

// observe records one sweep (the live operator keys, the owner refs of existing ApiKeys) at now and
// returns, per owner, the keys due for revocation: owner missing in every sweep for at least grace,
// keys live when it was first seen missing and still live.
func (t *orphanTracker) observe(now time.Time, keys []store.OperatorKey, present map[string]bool, grace time.Duration) map[string][]store.OperatorKey {
	if *t == nil {
		*t = orphanTracker{}
	}
	byOwner := map[string][]store.OperatorKey{}
	for _, k := range keys {
		if _, _, ok := notifyv1alpha1.ParseOwnerRef(k.OwnerRef); !ok {
			continue // not an owner_ref the operator wrote: not ours to judge
		}
		byOwner[k.OwnerRef] = append(byOwner[k.OwnerRef], k)
	}
	for owner := range *t {
		if present[owner] || byOwner[owner] == nil {
			delete(*t, owner) // back, or its keys went another way
		}
	}
	due := map[string][]store.OperatorKey{}
	for owner, ks := range byOwner {
		if present[owner] {
			continue
		}
		seen, ok := (*t)[owner]
		if !ok {
			ids := make([]string, 0, len(ks))
			for _, k := range ks {
				ids = append(ids, k.ID)
			}
			(*t)[owner] = sighting{since: now, keys: ids}
			continue
		}
		if now.Sub(seen.since) < grace {
			continue
		}
		for _, k := range ks {
			if slices.Contains(seen.keys, k.ID) {
				due[owner] = append(due[owner], k)
			}
		}
	}
	return due
}

func (t *orphanTracker) forget(owner string) { delete(*t, owner) }
