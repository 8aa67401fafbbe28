// Package queue is Herald's Kafka transport: the topic names, the envelope, and the producer.
// Kafka carries identifiers only; the message body lives in PostgreSQL.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/notification"
)

// HighPriorityThreshold is the priority from which a notification goes to the high topic.
const HighPriorityThreshold = notification.HighPriority

// EnvelopeVersion is the current envelope format.
const EnvelopeVersion = 1

// Envelope is the Kafka message value: {"v":1,"tracking_id":…,"tenant_id":…}. tenant_id is empty for
// system messages that belong to no tenant.
type Envelope struct {
	V          int    `json:"v"`
	TrackingID string `json:"tracking_id"`
	TenantID   string `json:"tenant_id"`
}

// Marshal encodes the envelope.
func (e Envelope) Marshal() []byte {
	b, _ := json.Marshal(e)
	return b
}

// ParseEnvelope decodes and checks an envelope.
func ParseEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("while decoding envelope: %w", err)
	}
	if e.V != EnvelopeVersion || e.TrackingID == "" {
		return e, fmt.Errorf("unsupported envelope (v=%d, tracking_id=%q)", e.V, e.TrackingID)
	}
	return e, nil
}

// Topics names the two priority topics.
type Topics struct{ High, Normal string }

// TopicsFor returns the topics under prefix.
func TopicsFor(prefix string) Topics {
	return Topics{High: prefix + ".notifications.high", Normal: prefix + ".notifications.normal"}
}

// For returns the topic for a priority.
func (t Topics) For(priority int) string {
	if priority >= HighPriorityThreshold {
		return t.High
	}
	return t.Normal
}

// Outgoing is one envelope to publish: its topic (by priority), its partition key and its value, and
// the headers that carry its trace context (internal/tracing; none when untraced).
type Outgoing struct {
	Priority int
	Key      []byte
	Envelope Envelope
	Headers  []kafka.Header
}

// NewOutgoing is NewOutgoingVia for the shared bot.
func NewOutgoing(trackingID, tenantID, userID string, chatID int64, priority int) Outgoing {
	return NewOutgoingVia(notification.SharedBot, trackingID, tenantID, userID, chatID, priority)
}

// NewOutgoingVia is the one constructor of an envelope: every message is keyed by the chat it goes to, of
// the bot it goes through (notification.ChatKey, the partition-key rule), so that the worker knows a
// message's bot from its key before it claims it. A tenant notification stored before its chat was
// recorded on the row (chatID 0, which predates tenants' own bots) is keyed by tenant and user
// ("tenant/user"), which keeps one user's messages together as before.
func NewOutgoingVia(bot notification.BotID, trackingID, tenantID, userID string, chatID int64, priority int) Outgoing {
	key := notification.ChatKey(bot, chatID)
	if chatID == 0 && userID != "" {
		key = tenantID + "/" + userID
	}
	return Outgoing{Priority: priority, Key: []byte(key),
		Envelope: Envelope{V: EnvelopeVersion, TrackingID: trackingID, TenantID: tenantID}}
}

// Producer writes envelopes with acknowledgement from all in-sync replicas.
type Producer struct {
	w      *kafka.Writer
	topics Topics
}

// NewProducer builds a producer. Its callers on the hot path (internal/outbox) hand it whole batches, which
// it spreads over the partitions, a few messages to each; two of kafka-go's defaults are tuned for that:
//   - BatchTimeout, how long a partition's batch waits for more messages before it is sent: kafka-go's 1 s
//     would make every synchronous send take a second. An outbox publish hands over a whole batch at
//     once, so waiting for more only delays it: 100 µs (docs/benchmarks.md, "Less garbage, the default
//     GOGC", has the publish's time at 1 ms and at 100 µs).
//   - BatchSize: kafka-go allocates BatchSize messages for every partition batch it starts, however few it
//     then holds, and at its default of 64 that was a large share of what the ingress allocated per send
//     (docs/benchmarks.md, the same section). 16 still holds what a
//     partition gets of one outbox batch (a batch of 256 sends gives each of 24 partitions about 11); a
//     partition that gets more is sent its messages in more than one produce request.
func NewProducer(brokers []string, prefix string) *Producer {
	w := &kafka.Writer{
		Addr:                   kafka.TCP(brokers...),
		Balancer:               &kafka.Murmur2Balancer{},
		RequiredAcks:           kafka.RequireAll,
		BatchTimeout:           100 * time.Microsecond,
		BatchSize:              16,
		MaxAttempts:            3,
		WriteBackoffMin:        10 * time.Millisecond,
		WriteBackoffMax:        200 * time.Millisecond,
		ReadTimeout:            5 * time.Second,
		WriteTimeout:           5 * time.Second,
		AllowAutoTopicCreation: false,
	}
	return &Producer{w: w, topics: TopicsFor(prefix)}
}

// Topics returns the producer's topics.
func (p *Producer) Topics() Topics { return p.topics }

// Close flushes and closes the writer.
func (p *Producer) Close() error { return p.w.Close() }

// DefaultPartitions is the partition count EnsureTopics creates topics with. It caps how many workers can
// share the load (the chart keeps KEDA's maxReplicaCount at or below it).
const DefaultPartitions = 12

// EnsureTopics creates the two topics when they do not exist yet. An existing topic is left as it is.
func EnsureTopics(ctx context.Context, brokers []string, prefix string, partitions, replication int) error {
	conn, err := dialController(ctx, brokers)
	if err != nil {
		return err
	}
	defer conn.Close()
	t := TopicsFor(prefix)
	configs := []kafka.TopicConfig{
		{Topic: t.High, NumPartitions: partitions, ReplicationFactor: replication},
		{Topic: t.Normal, NumPartitions: partitions, ReplicationFactor: replication},
	}
	if err := conn.CreateTopics(configs...); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("while creating topics %s, %s: %w", t.High, t.Normal, err)
	}
	return nil
}

// Ping checks that a broker answers a metadata request.
func Ping(ctx context.Context, brokers []string) error {
	d := &kafka.Dialer{Timeout: 2 * time.Second}
	_, err := firstBroker(ctx, brokers, d, func(conn *kafka.Conn) ([]kafka.Broker, error) {
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		return conn.Brokers()
	})
	if err != nil {
		return fmt.Errorf("no Kafka broker answers: %w", err)
	}
	return nil
}

func dialController(ctx context.Context, brokers []string) (*kafka.Conn, error) {
	d := &kafka.Dialer{Timeout: 5 * time.Second}
	cc, err := firstBroker(ctx, brokers, d, func(conn *kafka.Conn) (*kafka.Conn, error) {
		ctrl, err := conn.Controller()
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, "tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	})
	if err != nil {
		return nil, fmt.Errorf("while connecting to the Kafka controller: %w", err)
	}
	return cc, nil
}

// firstBroker dials the brokers in turn until fn succeeds on one, and returns what fn returned; the
// connection it hands fn is closed once fn returns. When none succeeds, the error is the last broker's.
func firstBroker[T any](ctx context.Context, brokers []string, d *kafka.Dialer, fn func(*kafka.Conn) (T, error)) (T, error) {
	var lastErr error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err != nil {
			lastErr = err
			continue
		}
		v, err := fn(conn)
		conn.Close()
		if err == nil {
			return v, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = errors.New("no broker given")
	}
	var none T
	return none, lastErr
}

// Publish writes envelopes in one call and waits for every acknowledgement (or ctx): kafka-go groups them
// into one produce request per partition.
func (p *Producer) Publish(ctx context.Context, out ...Outgoing) error {
	msgs := make([]kafka.Message, len(out))
	for i, o := range out {
		msgs[i] = kafka.Message{Topic: p.topics.For(o.Priority), Key: o.Key, Value: o.Envelope.Marshal(), Headers: o.Headers}
	}
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("while producing %d envelopes: %w", len(out), err)
	}
	return nil
}
