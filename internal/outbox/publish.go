package outbox

import (
	"context"
	"sync"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/tracing"
)

// SystemPriority puts system messages on the high topic.
const SystemPriority = 9

// SystemMessage is a message Herald sends to a chat on its own behalf: a link confirmation, a verification
// prompt, a reply to an update or a developer command. TenantID is the tenant it is about, or "" (the
// reply to an unknown command).
type SystemMessage struct {
	TenantID    string
	ChatID      int64
	Body        string // already branded where a tenant context exists
	ReplyMarkup []byte // optional keyboard (JSON)
}

// System builds the stored form of a system message, with a fresh tracking id, for a caller that inserts
// it in its own transaction (the webhook's updates, the verification start) and then calls Publish.
func System(m SystemMessage) store.NewNotification {
	return store.NewNotification{TrackingID: newTrackingID(), Kind: store.KindSystem, TenantID: m.TenantID,
		ChatID: m.ChatID, Priority: SystemPriority, Body: m.Body, ReplyMarkup: m.ReplyMarkup}
}

// outgoing is n's envelope, carrying headers (its request's trace context).
func outgoing(n store.NewNotification, headers []kafka.Header) queue.Outgoing {
	out := queue.NewOutgoing(n.TrackingID, n.TenantID, n.UserID, n.ChatID, n.Priority)
	out.Headers = headers
	return out
}

// publish produces envelopes in one call, within the produce timeout. Within a traced request it is a span
// of its own; a batch of many requests' sends is not (each envelope carries its own request's context).
func (o *Outbox) publish(ctx context.Context, out []queue.Outgoing) error {
	if trace.SpanContextFromContext(ctx).IsValid() {
		var span trace.Span
		ctx, span = tracing.Tracer().Start(ctx, "publish", trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attribute.Int("messaging.batch.message_count", len(out))))
		defer span.End()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	err := o.producer.Publish(ctx, out...)
	if err != nil {
		trace.SpanFromContext(ctx).SetStatus(codes.Error, err.Error())
	}
	return err
}

// Publish publishes system messages that the caller has committed. Those the broker does not take now are
// left to the relay (the worker publishes them once it can): the change that produced them stands. It
// reports whether everything was published now.
func (o *Outbox) Publish(ctx context.Context, ns []store.NewNotification) bool {
	if len(ns) == 0 {
		return true
	}
	headers := tracing.Headers(ctx)
	out := make([]queue.Outgoing, len(ns))
	for i, n := range ns {
		out[i] = outgoing(n, headers)
	}
	err := o.publish(ctx, out)
	if err == nil {
		return true
	}
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.TrackingID
	}
	o.log.Warn("messages not published yet; the relay will publish them", "count", len(ns), "err", err)
	if err := o.st.MarkUnpublished(context.WithoutCancel(ctx), ids); err != nil {
		// They keep published_at set: the redrive publishes them after its threshold.
		o.log.Error("could not hand unpublished messages to the relay; the redrive will publish them", "count", len(ids), "err", err)
	}
	return false
}

// Republisher is the store.RepublishFunc of the worker's loops (due retries, the relay, the redrive): it
// publishes each envelope of the batch (concurrent publishes share produce requests) and returns those the
// broker took. published counts them by the loop's reason.
func (o *Outbox) Republisher(published func(n int)) store.RepublishFunc {
	return func(ctx context.Context, batch []store.Pending) []string {
		var (
			mu   sync.Mutex
			done []string
			wg   sync.WaitGroup
			sem  = make(chan struct{}, 64)
		)
		for _, p := range batch {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				pctx, cancel := context.WithTimeout(ctx, o.timeout)
				defer cancel()
				if err := o.producer.Publish(pctx, queue.NewOutgoing(p.TrackingID, p.TenantID, p.UserID, p.ChatID, p.Priority)); err != nil {
					o.log.Warn("could not publish again", "tracking_id", p.TrackingID, "err", err)
					return
				}
				mu.Lock()
				done = append(done, p.TrackingID)
				mu.Unlock()
			})
		}
		wg.Wait()
		if published != nil {
			published(len(done))
		}
		return done
	}
}
