// Package kafkatest is the tests' side of internal/dev/kafkalocal: a broker per test, and reading back what
// was published.
package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/dev/kafkalocal"
	"github.com/heraldhq/herald/internal/queue"
)

// Broker is a running in-process broker (kafkalocal) that a test can read back.
type Broker struct {
	*kafkalocal.Broker
}

// Start starts a broker as kafkalocal.Start does; the caller closes it.
func Start(prefix string, port int, partitions int32) (*Broker, error) {
	b, err := kafkalocal.Start(prefix, port, partitions)
	if err != nil {
		return nil, err
	}
	return &Broker{b}, nil
}

// New starts a broker for one test and stops it when the test ends.
func New(t testing.TB, prefix string) *Broker {
	t.Helper()
	b, err := Start(prefix, 0, 4)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// Producer is a producer to the broker's topics of prefix, closed when the test ends.
func (b *Broker) Producer(t testing.TB, prefix string) *queue.Producer {
	t.Helper()
	p := queue.NewProducer(b.Addrs(), prefix)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Messages returns every message currently on topic, across all partitions, read with kafka-go.
func (b *Broker) Messages(t testing.TB, topic string) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialContext(ctx, "tcp", b.Addrs()[0])
	if err != nil {
		t.Fatalf("kafkatest: dial: %v", err)
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if err != nil {
		t.Fatalf("kafkatest: partitions of %s: %v", topic, err)
	}
	var out []kafka.Message
	for _, p := range parts {
		lc, err := kafka.DialLeader(ctx, "tcp", b.Addrs()[0], topic, p.ID)
		if err != nil {
			t.Fatalf("kafkatest: dial leader %s/%d: %v", topic, p.ID, err)
		}
		first, last, err := lc.ReadOffsets()
		if err != nil {
			lc.Close()
			t.Fatalf("kafkatest: offsets %s/%d: %v", topic, p.ID, err)
		}
		if last > first {
			if _, err := lc.Seek(first, kafka.SeekAbsolute); err != nil {
				lc.Close()
				t.Fatalf("kafkatest: seek: %v", err)
			}
			_ = lc.SetReadDeadline(time.Now().Add(5 * time.Second))
			batch := lc.ReadBatch(1, 64<<20)
			for off := first; off < last; off++ {
				m, err := batch.ReadMessage()
				if err != nil {
					break
				}
				m.Topic = topic
				out = append(out, m)
			}
			batch.Close()
		}
		lc.Close()
	}
	return out
}
