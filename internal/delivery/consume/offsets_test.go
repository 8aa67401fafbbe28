package consume

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestOffsetTrackerCommitsOnlyContiguouslyFinished(t *testing.T) {
	tr := newOffsetTracker()
	msg := func(p int, off int64) kafka.Message { return kafka.Message{Partition: p, Offset: off} }
	a, b, c := tr.add(msg(0, 10)), tr.add(msg(0, 11)), tr.add(msg(0, 12))
	other := tr.add(msg(1, 5))
	tr.done(b)
	tr.done(c)
	if got := tr.committable(); len(got) != 0 {
		t.Fatalf("committable = %v before offset 10 finished, want nothing", got)
	}
	tr.done(a)
	got := tr.committable()
	if len(got) != 1 || got[0].Offset != 12 {
		t.Fatalf("committable = %v, want partition 0 up to offset 12", got)
	}
	if tr.pendingCount() != 1 {
		t.Errorf("pending = %d, want 1 (partition 1)", tr.pendingCount())
	}
	tr.restore(got)
	if again := tr.committable(); len(again) != 1 || again[0].Offset != 12 {
		t.Errorf("a failed commit must be retried: %v", again)
	}
	// A rebalance rewinds partition 1: the old copy no longer counts.
	again := tr.add(msg(1, 5))
	tr.done(other)
	if got := tr.committable(); len(got) != 0 {
		t.Errorf("a stale copy made %v committable", got)
	}
	tr.done(again)
	if got := tr.committable(); len(got) != 1 || got[0].Partition != 1 || got[0].Offset != 5 {
		t.Errorf("committable = %v, want partition 1 offset 5", got)
	}
}
