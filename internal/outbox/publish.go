package outbox

import (
	"context"
	"sync"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/internal/notification"
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
	return store.NewNotification{TrackingID: newTrackingID(), Kind: notification.KindSystem, TenantID: m.TenantID,
		ChatID: m.ChatID, Priority: SystemPriority, Body: m.Body, ReplyMarkup: m.ReplyMarkup}
}

// outgoing is n's envelope, carrying headers (its request's trace context).
func outgoing(n store.NewNotification, headers []kafka.Header) queue.Outgoing {
	out := queue.NewOutgoingVia(n.Bot, n.TrackingID, n.TenantID, n.UserID, n.ChatID, n.Priority)
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
	headers := tracing.Headers(ctx)
	out := make([]queue.Outgoing, len(ns))
	ids := make([]string, len(ns))
	for i, n := range ns {
		out[i], ids[i] = outgoing(n, headers), n.TrackingID
	}
	return o.publishOrRelay(ctx, out, ids, "messages")
}

// publishOrRelay publishes committed, queued notifications within the produce timeout; those the broker
// does not take are handed to the relay (published_at cleared). It reports whether all were published.
func (o *Outbox) publishOrRelay(ctx context.Context, out []queue.Outgoing, ids []string, what string) bool {
	if len(out) == 0 {
		return true
	}
	err := o.publish(ctx, out)
	if err == nil {
		return true
	}
	o.log.Warn(what+" not published yet; the relay will publish them", "count", len(ids), "err", err)
	if err := o.st.MarkUnpublished(context.WithoutCancel(ctx), ids); err != nil {
		// They keep published_at set: the redrive publishes them after its threshold.
		o.log.Error("could not hand unpublished "+what+" to the relay; the redrive will publish them", "count", len(ids), "err", err)
	}
	return false
}

// ReleaseScheduled is the scheduler's step, run by the worker: it moves up to limit scheduled
// notifications whose send_at has come to queued (committed first, like every publish here), then
// publishes them; a publish that fails leaves them to the relay, which publishes them once the broker
// takes them. One caller at a time releases (store.ReleaseScheduled): locked is false when another one
// held the scheduler's lock, and then nothing was done.
func (o *Outbox) ReleaseScheduled(ctx context.Context, limit int) (released int, locked bool, err error) {
	due, locked, err := o.st.ReleaseScheduled(ctx, limit)
	if err != nil || len(due) == 0 {
		return 0, locked, err
	}
	out := make([]queue.Outgoing, len(due))
	ids := make([]string, len(due))
	for i, p := range due {
		out[i], ids[i] = queue.NewOutgoingVia(p.Bot, p.TrackingID, p.TenantID, p.UserID, p.ChatID, p.Priority), p.TrackingID
	}
	o.publishOrRelay(ctx, out, ids, "scheduled notifications")
	return len(due), true, nil
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
				if err := o.producer.Publish(pctx, queue.NewOutgoingVia(p.Bot, p.TrackingID, p.TenantID, p.UserID, p.ChatID, p.Priority)); err != nil {
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
