package controllers

import (
	"context"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

const (
	// BotStatePollInterval is how often the bots table is read for changes the operator did not make: a
	// worker whose send met the platform's 401 marks the bot's token refused, and the Tenants sending
	// through it then show BotReady=False within about this, not at their next resync.
	BotStatePollInterval = 5 * time.Second
	// botStateOverlap: each poll reads again the rows changed shortly before the newest it saw, since a
	// row's updated_at is its statement's start and it commits a moment later (store.BotsChangedSince).
	botStateOverlap = 10 * time.Second
)

// BotStateWatcher wakes the Tenants of a bot whose row changed in the store. An event's object names
// the bot by its id (as status.bot.id has it), in its name.
type BotStateWatcher struct {
	store  *store.Store
	log    logr.Logger
	events chan event.GenericEvent
}

// NewBotStateWatcher makes a watcher of st's bots table.
func NewBotStateWatcher(st *store.Store, log logr.Logger) *BotStateWatcher {
	return &BotStateWatcher{store: st, log: log.WithName("bot-state-watch"), events: make(chan event.GenericEvent)}
}

// Events delivers a bot whenever its row changes.
func (w *BotStateWatcher) Events() <-chan event.GenericEvent { return w.events }

// NeedLeaderElection is true: the events only feed the Tenant controller, which runs on the leader.
func (w *BotStateWatcher) NeedLeaderElection() bool { return true }

// Start polls until ctx ends (manager.Runnable). The first read only learns what is there: every Tenant
// is reconciled when the operator starts anyway.
func (w *BotStateWatcher) Start(ctx context.Context) error {
	seen := map[notification.BotID]time.Time{}
	var since time.Time
	first := true
	tick := time.NewTicker(BotStatePollInterval)
	defer tick.Stop()
	for {
		bots, err := w.store.BotsChangedSince(ctx, since)
		if err != nil {
			// An outage of the store: the reconcilers report it; poll again later.
			w.log.V(1).Info("could not read the bots' changes", "error", err.Error())
		}
		for _, b := range bots {
			if seen[b.ID].Equal(b.UpdatedAt) {
				continue
			}
			seen[b.ID] = b.UpdatedAt
			if b.UpdatedAt.Add(-botStateOverlap).After(since) {
				since = b.UpdatedAt.Add(-botStateOverlap)
			}
			if first {
				continue
			}
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: strconv.FormatInt(int64(b.ID), 10)}}
			select {
			case w.events <- event.GenericEvent{Object: obj}:
			case <-ctx.Done():
				return nil
			}
		}
		if err == nil {
			first = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
