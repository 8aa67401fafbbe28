package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// groupView reads the consumer group's state from the broker: the partitions this worker holds (the
// herald_worker_partitions gauge), the group's lag, and whether it has caught up to a moment (the fast
// redrive, delivery's republish.go). It reads this worker's partitions after every rebalance its readers report, when
// a message arrives from a partition it did not know it had, and every AssignmentInterval. Members are
// recognised by the worker's client id.
type groupView struct {
	g      *Group
	client *kafka.Client
	// transport is the client's own: after a broker outage its pooled connections are dead, and kafka-go
	// keeps handing them out until they idle out (30 s by default). Every failed call closes them
	// (resetAfter).
	transport *kafka.Transport

	mu      sync.Mutex
	known   map[string]map[int]bool // partitions seen in the last description
	refresh chan struct{}
}

func newGroupView(g *Group) *groupView {
	t := &kafka.Transport{DialTimeout: 5 * time.Second, IdleTimeout: 10 * time.Second, ClientID: g.opts.ClientID}
	return &groupView{
		g:         g,
		transport: t,
		client:    &kafka.Client{Addr: kafka.TCP(g.opts.Brokers...), Timeout: 10 * time.Second, Transport: t},
		known:     map[string]map[int]bool{},
		refresh:   make(chan struct{}, 1),
	}
}

// resetAfter closes the client's connections when err is not nil, so the next call dials afresh.
func (s *groupView) resetAfter(err error) error {
	if err != nil && !errors.Is(err, errUnstable) {
		s.transport.CloseIdleConnections()
	}
	return err
}

// sawPartition asks for a refresh when a message comes from a partition the last description did not
// give this worker (it got new partitions in a rebalance).
func (s *groupView) sawPartition(topic string, partition int) {
	s.mu.Lock()
	ok := s.known[topic][partition]
	s.mu.Unlock()
	if !ok {
		s.poke()
	}
}

func (s *groupView) poke() {
	select {
	case s.refresh <- struct{}{}:
	default:
	}
}

func (s *groupView) run(ctx context.Context) {
	// Readers report rebalances through their stats; polling them is how a rebalance is noticed quickly.
	watch := time.NewTicker(100 * time.Millisecond)
	defer watch.Stop()
	periodic := time.NewTicker(s.g.opts.AssignmentInterval)
	defer periodic.Stop()
	defer s.transport.CloseIdleConnections()
	retry := time.Duration(0)
	for {
		var after <-chan time.Time
		if retry > 0 {
			after = time.After(retry)
		}
		select {
		case <-ctx.Done():
			return
		case <-watch.C:
			rebalanced := false
			for _, c := range s.g.readers {
				if c.reader.Stats().Rebalances > 0 {
					rebalanced = true
				}
			}
			if !rebalanced {
				continue
			}
		case <-periodic.C:
		case <-s.refresh:
		case <-after:
		}
		if err := s.update(ctx); err != nil {
			// Unstable while a rebalance is in progress: look again soon.
			s.g.log.Debug("partition assignment not read", "err", err)
			retry = 200 * time.Millisecond
			continue
		}
		retry = 0
	}
}

var errUnstable = errors.New("consumer group is rebalancing")

// update reads the group description and records this worker's partitions.
func (s *groupView) update(ctx context.Context) error {
	return s.resetAfter(s.updateOnce(ctx))
}

func (s *groupView) updateOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := s.client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{s.g.opts.GroupID}})
	if err != nil {
		return fmt.Errorf("while describing the consumer group: %w", err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].Error != nil {
		return fmt.Errorf("while describing the consumer group: %v", resp.Groups)
	}
	g := resp.Groups[0]
	if g.GroupState != "Stable" {
		return errUnstable
	}
	known := map[string]map[int]bool{}
	mine := 0
	for _, m := range g.Members {
		if m.ClientID != s.g.opts.ClientID {
			continue
		}
		for _, t := range m.MemberAssignments.Topics {
			if known[t.Topic] == nil {
				known[t.Topic] = map[int]bool{}
			}
			for _, p := range t.Partitions {
				known[t.Topic][p] = true
				mine++
			}
		}
	}
	s.mu.Lock()
	s.known = known
	s.mu.Unlock()
	assignedPartitions.Set(float64(mine))
	return nil
}

// UpdateLag sets herald_worker_consumer_lag from the group's committed offsets and the topics' end offsets.
// Every replica reports the same group-wide figure; autoscaling takes the maximum.
func (g *Group) UpdateLag(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lags, err := g.view.lag(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Warn("could not compute the consumer lag", "err", err)
		}
		return
	}
	for topic, lag := range lags {
		consumerLag.WithLabelValues(topic).Set(float64(lag))
	}
}

// lag is, per topic, the sum over partitions of the end offset minus the group's committed offset (the
// start offset where the group has committed nothing).
func (s *groupView) lag(ctx context.Context) (map[string]int64, error) {
	lags, err := s.lagOnce(ctx)
	return lags, s.resetAfter(err)
}

func (s *groupView) lagOnce(ctx context.Context) (map[string]int64, error) {
	topics := []string{s.g.opts.Topics.High, s.g.opts.Topics.Normal}
	meta, err := s.client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("while reading topic metadata: %w", err)
	}
	parts := map[string][]int{}
	var ends, starts = map[string][]kafka.OffsetRequest{}, map[string][]kafka.OffsetRequest{}
	for _, t := range meta.Topics {
		for _, p := range t.Partitions {
			parts[t.Name] = append(parts[t.Name], p.ID)
			ends[t.Name] = append(ends[t.Name], kafka.LastOffsetOf(p.ID))
			starts[t.Name] = append(starts[t.Name], kafka.FirstOffsetOf(p.ID))
		}
	}
	committed, err := s.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: s.g.opts.GroupID, Topics: parts})
	if err != nil {
		return nil, fmt.Errorf("while fetching committed offsets: %w", err)
	}
	last, err := s.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: ends})
	if err != nil {
		return nil, fmt.Errorf("while listing end offsets: %w", err)
	}
	first, err := s.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: starts})
	if err != nil {
		return nil, fmt.Errorf("while listing start offsets: %w", err)
	}
	out := map[string]int64{}
	for _, topic := range topics {
		done := map[int]int64{}
		for _, p := range committed.Topics[topic] {
			done[p.Partition] = p.CommittedOffset
		}
		start := map[int]int64{}
		for _, p := range first.Topics[topic] {
			start[p.Partition] = p.FirstOffset
		}
		var lag int64
		for _, p := range last.Topics[topic] {
			from, ok := done[p.Partition]
			if !ok || from < 0 {
				from = start[p.Partition]
			}
			lag += max(0, p.LastOffset-from)
		}
		out[topic] = lag
	}
	return out, nil
}

// CaughtUpTo reports whether the group has committed, on every partition of both topics, past every
// message produced before t (by the messages' timestamps): then no envelope published before t is still
// waiting in Kafka (the redrive's fast path).
func (g *Group) CaughtUpTo(ctx context.Context, t time.Time) (bool, error) {
	return g.view.caughtUpTo(ctx, t)
}

// Partitions are the partitions of topic this worker held at the last reading of the group.
func (g *Group) Partitions(topic string) map[int]bool {
	g.view.mu.Lock()
	defer g.view.mu.Unlock()
	out := map[int]bool{}
	for p := range g.view.known[topic] {
		out[p] = true
	}
	return out
}

// caughtUpTo reports whether the group has committed, on every partition of both topics, past every
// message produced before t (by the messages' timestamps): then no envelope published before t is still
// waiting in Kafka.
func (s *groupView) caughtUpTo(ctx context.Context, t time.Time) (bool, error) {
	ok, err := s.caughtUpOnce(ctx, t)
	return ok, s.resetAfter(err)
}

func (s *groupView) caughtUpOnce(ctx context.Context, t time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	topics := []string{s.g.opts.Topics.High, s.g.opts.Topics.Normal}
	meta, err := s.client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return false, fmt.Errorf("while reading topic metadata: %w", err)
	}
	parts := map[string][]int{}
	at, ends := map[string][]kafka.OffsetRequest{}, map[string][]kafka.OffsetRequest{}
	for _, tp := range meta.Topics {
		for _, p := range tp.Partitions {
			parts[tp.Name] = append(parts[tp.Name], p.ID)
			at[tp.Name] = append(at[tp.Name], kafka.TimeOffsetOf(p.ID, t))
			ends[tp.Name] = append(ends[tp.Name], kafka.LastOffsetOf(p.ID))
		}
	}
	if len(parts) != len(topics) {
		return false, fmt.Errorf("while reading topic metadata: %d of %d topics", len(parts), len(topics))
	}
	committed, err := s.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: s.g.opts.GroupID, Topics: parts})
	if err != nil {
		return false, fmt.Errorf("while fetching committed offsets: %w", err)
	}
	atT, err := s.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: at})
	if err != nil {
		return false, fmt.Errorf("while listing offsets by time: %w", err)
	}
	last, err := s.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: ends})
	if err != nil {
		return false, fmt.Errorf("while listing end offsets: %w", err)
	}
	for _, topic := range topics {
		done := map[int]int64{}
		for _, p := range committed.Topics[topic] {
			if p.Error != nil {
				return false, fmt.Errorf("committed offset of %s/%d: %w", topic, p.Partition, p.Error)
			}
			done[p.Partition] = p.CommittedOffset
		}
		end := map[int]int64{}
		for _, p := range last.Topics[topic] {
			end[p.Partition] = p.LastOffset
		}
		for _, p := range atT.Topics[topic] {
			if p.Error != nil {
				return false, fmt.Errorf("offset by time of %s/%d: %w", topic, p.Partition, p.Error)
			}
			// The first message at or after t; none (every message is older): the end of the partition.
			need := end[p.Partition]
			for off := range p.Offsets {
				if off >= 0 && off < need {
					need = off
				}
			}
			got, ok := done[p.Partition]
			if !ok || got < 0 {
				got = 0 // nothing committed: caught up only if the partition had nothing before t
			}
			if got < need {
				return false, nil
			}
		}
	}
	return true, nil
}
