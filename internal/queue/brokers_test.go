package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
)

// deadBroker is an address where nothing listens: the connection is refused at once.
const deadBroker = "127.0.0.1:1"

func TestPingAndEnsureTopicsTryTheBrokersInTurn(t *testing.T) {
	t.Parallel()
	b := kafkatest.New(t, "qb")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers := append([]string{deadBroker}, b.Addrs()...)

	if err := queue.Ping(ctx, brokers); err != nil {
		t.Errorf("Ping past a dead broker: %v", err)
	}
	if err := queue.Ping(ctx, []string{deadBroker}); err == nil || !strings.HasPrefix(err.Error(), "no Kafka broker answers: ") {
		t.Errorf("Ping of a dead broker only: %v, want no Kafka broker answers", err)
	}

	if err := queue.EnsureTopics(ctx, brokers, "made", 3, 1); err != nil {
		t.Fatalf("EnsureTopics past a dead broker: %v", err)
	}
	// Again: the topics exist, which is no error.
	if err := queue.EnsureTopics(ctx, brokers, "made", 3, 1); err != nil {
		t.Fatalf("EnsureTopics again: %v", err)
	}
	conn, err := kafka.DialContext(ctx, "tcp", b.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	topics := queue.TopicsFor("made")
	for _, topic := range []string{topics.High, topics.Normal} {
		parts, err := conn.ReadPartitions(topic)
		if err != nil || len(parts) != 3 {
			t.Errorf("topic %s: %d partitions (%v), want 3", topic, len(parts), err)
		}
	}
	if err := queue.EnsureTopics(ctx, []string{deadBroker}, "made", 3, 1); err == nil || !strings.HasPrefix(err.Error(), "while connecting to the Kafka controller: ") {
		t.Errorf("EnsureTopics with a dead broker only: %v, want while connecting to the Kafka controller", err)
	}
}
