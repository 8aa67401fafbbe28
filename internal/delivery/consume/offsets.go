package consume

import (
	"context"
	"sync"

	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/queue"
)

// offsetTracker finds, per partition, the last message up to which everything fetched has finished: the
// only offset that may be committed when messages of one partition finish out of order (many chats are in
// flight at once).
type offsetTracker struct {
	mu    sync.Mutex
	parts map[int]*partitionOffsets
}

type partitionOffsets struct {
	// epoch changes when the reader goes back (after a rebalance it resumes from the committed offset), so
	// completions of the earlier copies no longer count: their re-fetched copies will.
	epoch    int
	lastSeen int64
	pending  []*fetched // in fetch order
	ready    *kafka.Message
}

// fetched is one message between fetch and completion.
type fetched struct {
	msg    kafka.Message
	part   *partitionOffsets
	epoch  int
	done   bool
	env    queue.Envelope  // its value, decoded at fetch
	envErr error           // why the value is not an envelope
	tenant string          // the metric label of its tenant
	gen    context.Context // the group generation it was fetched in (consumer.go)
}

func newOffsetTracker() *offsetTracker {
	return &offsetTracker{parts: map[int]*partitionOffsets{}}
}

// add records a fetched message.
func (t *offsetTracker) add(m kafka.Message) *fetched {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[m.Partition]
	if p == nil {
		p = &partitionOffsets{lastSeen: -1}
		t.parts[m.Partition] = p
	}
	if m.Offset <= p.lastSeen {
		p.epoch++
		p.pending, p.ready = nil, nil
	}
	p.lastSeen = m.Offset
	f := &fetched{msg: m, part: p, epoch: p.epoch}
	p.pending = append(p.pending, f)
	return f
}

// reset forgets every partition's progress at the end of a group generation: the next generation reads
// from the committed offsets again, and completions of this one's messages no longer count.
func (t *offsetTracker) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.parts {
		p.epoch++
		p.lastSeen = -1
		p.pending, p.ready = nil, nil
	}
}

// done marks a message finished and advances its partition's committable offset past every finished
// message at the head.
func (t *offsetTracker) done(f *fetched) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := f.part
	if f.epoch != p.epoch {
		return
	}
	f.done = true
	i := 0
	for i < len(p.pending) && p.pending[i].done {
		p.ready = &p.pending[i].msg
		i++
	}
	clear(p.pending[:i])
	p.pending = p.pending[i:]
}

// committable returns, per partition, the last contiguously finished message not yet handed out.
func (t *offsetTracker) committable() []kafka.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []kafka.Message
	for _, p := range t.parts {
		if p.ready != nil {
			out = append(out, *p.ready)
			p.ready = nil
		}
	}
	return out
}

// restore gives back messages whose commit failed, unless a later one is ready meanwhile.
func (t *offsetTracker) restore(msgs []kafka.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		if p := t.parts[m.Partition]; p != nil && (p.ready == nil || p.ready.Offset < m.Offset) {
			mm := m
			p.ready = &mm
		}
	}
}

// pendingCount is how many fetched messages have not finished.
func (t *offsetTracker) pendingCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.parts {
		for _, f := range p.pending {
			if !f.done {
				n++
			}
		}
	}
	return n
}
