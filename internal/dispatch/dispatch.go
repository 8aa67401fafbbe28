// Package dispatch queues the system messages Herald sends to end users on its own behalf (link
// confirmations, webhook replies, developer command answers): stored as notifications of kind "system" and
// produced to the high topic, delivered by the same workers as tenant notifications.
package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
)

// SystemPriority puts system messages on the high topic.
const SystemPriority = 9

// Dispatcher stores and produces system messages.
type Dispatcher struct {
	Store    *store.Store
	Producer *queue.Producer
	// Timeout bounds the Kafka acknowledgement; 2 s when zero.
	Timeout time.Duration
}

// Message is one system message to a chat. TenantID is the tenant the message is about, or "" (for
// example the reply to an unknown command).
type Message struct {
	TenantID    string
	ChatID      int64
	Body        string          // already branded where a tenant context exists
	ReplyMarkup json.RawMessage // optional keyboard
}

// Send stores the message and produces its envelope; the row commits only once Kafka acknowledged.
func (d Dispatcher) Send(ctx context.Context, m Message) (trackingID string, err error) {
	n := d.Notification(m)
	err = d.Store.EnqueueSystem(ctx, n, d.Publisher(n))
	if err != nil {
		return "", fmt.Errorf("while queueing a system message: %w", err)
	}
	return n.TrackingID, nil
}

// Notification builds the stored form of m with a fresh tracking id, for callers that insert it inside
// their own transaction (then publish with Publisher).
func (d Dispatcher) Notification(m Message) store.NewNotification {
	return store.NewNotification{
		TrackingID:  uuid.Must(uuid.NewV7()).String(),
		Kind:        store.KindSystem,
		TenantID:    m.TenantID,
		ChatID:      m.ChatID,
		Priority:    SystemPriority,
		Body:        m.Body,
		ReplyMarkup: m.ReplyMarkup,
	}
}

// Publisher produces n's envelope within the dispatcher's timeout.
func (d Dispatcher) Publisher(n store.NewNotification) store.Publisher {
	return func(ctx context.Context) error {
		timeout := d.Timeout
		if timeout == 0 {
			timeout = 2 * time.Second
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return d.Producer.Publish(ctx, n.Priority, queue.ChatKey(n.ChatID),
			queue.Envelope{V: queue.EnvelopeVersion, TrackingID: n.TrackingID, TenantID: n.TenantID})
	}
}
