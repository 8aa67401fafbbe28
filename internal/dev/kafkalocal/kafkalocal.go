// Package kafkalocal runs an in-process Kafka-protocol broker (franz-go's kfake) for `herald dev`, the
// benchmarks and the tests (internal/testing/kafkatest), as internal/dev/pglocal runs a private PostgreSQL.
// Herald speaks to it with kafka-go exactly as it speaks to a real cluster.
package kafkalocal

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heraldhq/herald/internal/queue"
)

// Broker is a running kfake cluster with Herald's topics created.
type Broker struct {
	c *kfake.Cluster
}

// Start starts a one-broker cluster listening on 127.0.0.1 (port 0 picks a free one) with the two
// notification topics of prefix.
func Start(prefix string, port int, partitions int32) (*Broker, error) {
	t := queue.TopicsFor(prefix)
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(partitions, t.High, t.Normal),
		kfake.AllowAutoTopicCreation(),
	}
	if port != 0 {
		opts = append(opts, kfake.Ports(port))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("while starting the embedded Kafka broker: %w", err)
	}
	return &Broker{c: c}, nil
}

// Addrs are the broker addresses.
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// Cluster exposes kfake for fault injection in tests.
func (b *Broker) Cluster() *kfake.Cluster { return b.c }

// Close stops the broker.
func (b *Broker) Close() { b.c.Close() }
