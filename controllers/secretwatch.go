package controllers

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

var secretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// SecretWatcher watches the key Secrets namespace by namespace, so that the operator needs no access to
// Secrets outside the namespaces a platform team granted it (a RoleBinding to the ClusterRole
// herald-operator-secrets per namespace). A cluster-wide watch would need list and watch on every Secret
// of the cluster; the namespaces are not known at start, since Tenants list them, so the ApiKey
// reconciler asks for a namespace's watch once it could read a Secret there.
//
// Only the metadata of Secrets labelled ManagedByLabel=ManagedByValue is watched: the operator keeps no
// key in memory, and a changed or deleted Secret wakes its owning ApiKey through Events.
type SecretWatcher struct {
	client metadata.Interface
	log    logr.Logger
	events chan event.GenericEvent

	mu       sync.Mutex
	ctx      context.Context // set while running (the manager started it)
	watching map[string]context.CancelFunc
	pending  map[string]bool // asked for before the watcher runs
}

// NewSecretWatcher makes a watcher that talks to the API server with cfg.
func NewSecretWatcher(cfg *rest.Config, log logr.Logger) (*SecretWatcher, error) {
	c, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &SecretWatcher{
		client:   c,
		log:      log.WithName("secret-watch"),
		events:   make(chan event.GenericEvent),
		watching: map[string]context.CancelFunc{},
		pending:  map[string]bool{},
	}, nil
}

// Events delivers a Secret's metadata whenever one the operator manages is added, changed or deleted.
func (w *SecretWatcher) Events() <-chan event.GenericEvent { return w.events }

// NeedLeaderElection is true: the watches only feed the ApiKey controller, which runs on the leader.
func (w *SecretWatcher) NeedLeaderElection() bool { return true }

// Start runs the watches until ctx ends (manager.Runnable).
func (w *SecretWatcher) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	for ns := range w.pending {
		w.start(ns)
	}
	clear(w.pending)
	w.mu.Unlock()

	<-ctx.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	for ns, stop := range w.watching {
		stop()
		delete(w.watching, ns)
	}
	w.ctx = nil
	return nil
}

// Watch makes sure the Secrets of namespace ns are watched. It is cheap when they already are.
func (w *SecretWatcher) Watch(ns string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watching[ns]; ok {
		return
	}
	if w.ctx == nil {
		w.pending[ns] = true
		return
	}
	w.start(ns)
}

// Forget stops watching namespace ns (the operator lost its access there).
func (w *SecretWatcher) Forget(ns string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, ns)
	if stop, ok := w.watching[ns]; ok {
		stop()
		delete(w.watching, ns)
		w.log.Info("stopped watching Secrets", "namespace", ns)
	}
}

// start runs the informer of one namespace; w.mu is held.
func (w *SecretWatcher) start(ns string) {
	ctx, cancel := context.WithCancel(w.ctx)
	w.watching[ns] = cancel
	selector := ManagedByLabel + "=" + ManagedByValue
	inf := metadatainformer.NewFilteredMetadataInformer(w.client, secretsResource, ns, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector }).Informer()
	log := w.log.WithValues("namespace", ns)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			log.Error(err, "may not watch Secrets: bind the ClusterRole herald-operator-secrets in this namespace")
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	send := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		o, ok := obj.(client.Object)
		if !ok {
			return
		}
		select {
		case w.events <- event.GenericEvent{Object: o}:
		case <-ctx.Done():
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    send,
		UpdateFunc: func(_, obj any) { send(obj) },
		DeleteFunc: send,
	})
	go inf.RunWithContext(ctx)
	log.Info("watching Secrets", "selector", selector)
}
