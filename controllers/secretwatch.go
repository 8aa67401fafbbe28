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
// Only the metadata of Secrets is watched: the operator keeps no key in memory, and a changed or deleted
// Secret wakes its owning ApiKey through Events. In a namespace the ApiKeys alone need (Watch), only the
// Secrets labelled ManagedByLabel=ManagedByValue are. A Tenant's bot token is in a Secret the platform
// team made, without that label, and RBAC cannot narrow a watch to some names: in a namespace holding one
// (WatchAll) every Secret is watched, and a change wakes the Tenants naming it through BotEvents. The
// cache keeps of each only what the mapping needs (names, labels, owners), not its annotations, where
// `kubectl apply` copies a Secret's data.
type SecretWatcher struct {
	client    metadata.Interface
	log       logr.Logger
	events    chan event.GenericEvent
	botEvents chan event.GenericEvent

	mu       sync.Mutex
	ctx      context.Context // set while running (the manager started it)
	watching map[string]namespaceWatch
	pending  map[string]bool // asked for before the watcher runs: namespace → every Secret
}

// namespaceWatch is the running watch of one namespace.
type namespaceWatch struct {
	stop context.CancelFunc
	all  bool // every Secret, not only the labelled ones
}

// NewSecretWatcher makes a watcher that talks to the API server with cfg.
func NewSecretWatcher(cfg *rest.Config, log logr.Logger) (*SecretWatcher, error) {
	c, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &SecretWatcher{
		client:    c,
		log:       log.WithName("secret-watch"),
		events:    make(chan event.GenericEvent),
		botEvents: make(chan event.GenericEvent),
		watching:  map[string]namespaceWatch{},
		pending:   map[string]bool{},
	}, nil
}

// Events delivers a Secret's metadata whenever one the operator manages is added, changed or deleted.
func (w *SecretWatcher) Events() <-chan event.GenericEvent { return w.events }

// BotEvents delivers a Secret's metadata whenever one of a namespace watched with WatchAll is added,
// changed or deleted.
func (w *SecretWatcher) BotEvents() <-chan event.GenericEvent { return w.botEvents }

// NeedLeaderElection is true: the watches only feed the ApiKey controller, which runs on the leader.
func (w *SecretWatcher) NeedLeaderElection() bool { return true }

// Start runs the watches until ctx ends (manager.Runnable).
func (w *SecretWatcher) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	for ns, all := range w.pending {
		w.start(ns, all)
	}
	clear(w.pending)
	w.mu.Unlock()

	<-ctx.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	for ns, nw := range w.watching {
		nw.stop()
		delete(w.watching, ns)
	}
	w.ctx = nil
	return nil
}

// Watch makes sure the Secrets the operator manages in namespace ns are watched. It is cheap when they
// already are.
func (w *SecretWatcher) Watch(ns string) { w.watch(ns, false) }

// WatchAll makes sure every Secret of namespace ns is watched (a Tenant's bot token is there). It is
// cheap when they already are; a namespace stays so watched until the operator restarts.
func (w *SecretWatcher) WatchAll(ns string) { w.watch(ns, true) }

func (w *SecretWatcher) watch(ns string, all bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	nw, ok := w.watching[ns]
	if ok && (nw.all || !all) {
		return
	}
	if w.ctx == nil {
		w.pending[ns] = w.pending[ns] || all
		return
	}
	if ok {
		nw.stop() // the labelled watch gives way to the wider one
	}
	w.start(ns, all)
}

// Forget stops watching namespace ns (the operator lost its access there).
func (w *SecretWatcher) Forget(ns string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, ns)
	if nw, ok := w.watching[ns]; ok {
		nw.stop()
		delete(w.watching, ns)
		w.log.Info("stopped watching Secrets", "namespace", ns)
	}
}

// start runs the informer of one namespace; w.mu is held.
func (w *SecretWatcher) start(ns string, all bool) {
	ctx, cancel := context.WithCancel(w.ctx)
	w.watching[ns] = namespaceWatch{stop: cancel, all: all}
	selector := ManagedByLabel + "=" + ManagedByValue
	if all {
		selector = ""
	}
	inf := metadatainformer.NewFilteredMetadataInformer(w.client, secretsResource, ns, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector }).Informer()
	_ = inf.SetTransform(slimSecret)
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
		if o.GetLabels()[ManagedByLabel] == ManagedByValue {
			select {
			case w.events <- event.GenericEvent{Object: o}:
			case <-ctx.Done():
			}
		}
		if all {
			select {
			case w.botEvents <- event.GenericEvent{Object: o}:
			case <-ctx.Done():
			}
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

// slimSecret keeps of a Secret's metadata what the watches' handlers read: its name, labels and owners.
// Its annotations go: `kubectl apply` copies the whole Secret, data included, into one of them.
func slimSecret(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.Annotations = nil
		m.ManagedFields = nil
	}
	return obj, nil
}
