package consume

import (
	"sync"

	"github.com/segmentio/kafka-go"
)

// offsetTracker finds, per partition, the last message up to which everything fetched has finished: the
// only offset that may be committed when messages of one partition finish out of order (many chats are in
// flight at once).
type offsetTracker struct {
	mu    sync.Mutex
	parts map[int]*partitionOffsets
}

type partitionOffsets struct {
	topic     string
	partition int
	// epoch changes when the reader goes back (after a rebalance it resumes from the committed offset), so
	// completions of the earlier copies no longer count: their re-fetched copies will.
	epoch    int
	lastSeen int64
	// marks are the messages fetched and not yet passed by the committable offset, in fetch order; marks[0]
	// is the one with sequence number first. A mark is small: a worker holding a large backlog (consumer.go,
	// "held") keeps one per message.
	marks []mark
	first int64
	ready int64 // the offset to commit up to (the last contiguously finished message), -1 when none is new
}

type mark struct {
	offset int64
	done   bool
}

// ticket is what a fetched message carries to mark itself finished.
type ticket struct {
	part  *partitionOffsets
	epoch int
	seq   int64
}

func newOffsetTracker() *offsetTracker {
	return &offsetTracker{parts: map[int]*partitionOffsets{}}
}

// add records a fetched message.
func (t *offsetTracker) add(m kafka.Message) ticket {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[m.Partition]
	if p == nil {
		p = &partitionOffsets{topic: m.Topic, partition: m.Partition, lastSeen: -1, ready: -1}
		t.parts[m.Partition] = p
	}
	if m.Offset <= p.lastSeen {
		p.rewind()
	}
	p.lastSeen = m.Offset
	p.marks = append(p.marks, mark{offset: m.Offset})
	return ticket{part: p, epoch: p.epoch, seq: p.first + int64(len(p.marks)) - 1}
}

// rewind forgets the partition's progress: its messages are read again from an earlier offset.
func (p *partitionOffsets) rewind() {
	p.epoch++
	p.first += int64(len(p.marks))
	p.marks, p.ready = nil, -1
}

// reset forgets every partition's progress at the end of a group generation: the next generation reads
// from the committed offsets again, and completions of this one's messages no longer count.
func (t *offsetTracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.parts {
		p.rewind()
		p.lastSeen = -1
	}
}

// done marks a message finished and advances its partition's committable offset past every finished
// message at the head.
func (t *offsetTracker) done(k ticket) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := k.part
	if k.epoch != p.epoch {
		return
	}
	p.marks[k.seq-p.first].done = true
	i := 0
	for i < len(p.marks) && p.marks[i].done {
		p.ready = p.marks[i].offset
		i++
	}
	p.marks = p.marks[i:]
	p.first += int64(i)
}

// committable returns, per partition, the last contiguously finished message not yet handed out.
func (t *offsetTracker) committable() []kafka.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []kafka.Message
	for _, p := range t.parts {
		if p.ready >= 0 {
			out = append(out, kafka.Message{Topic: p.topic, Partition: p.partition, Offset: p.ready})
			p.ready = -1
		}
	}
	return out
}

// restore gives back messages whose commit failed, unless a later one is ready meanwhile.
func (t *offsetTracker) restore(msgs []kafka.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		if p := t.parts[m.Partition]; p != nil && p.ready < m.Offset {
			p.ready = m.Offset
		}
	}
}

// pendingCount is how many fetched messages have not finished.
func (t *offsetTracker) pendingCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.parts {
		for _, m := range p.marks {
			if !m.done {
				n++
			}
		}
	}
	return n
}
