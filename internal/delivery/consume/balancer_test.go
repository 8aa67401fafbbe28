package consume

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/segmentio/kafka-go"
)

// Partition n of both topics goes to the same worker, whatever order the broker lists partitions in.
func TestAlignedRangeGivesAWorkerTheSamePartitionsOfBothTopics(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 5} {
		var members []kafka.GroupMember
		for w := range workers {
			for _, topic := range []string{"high", "normal"} {
				members = append(members, kafka.GroupMember{ID: fmt.Sprintf("herald-worker-%02d-%s-%d", w, topic, rand.Int()), Topics: []string{topic}})
			}
		}
		var partitions []kafka.Partition
		for _, topic := range []string{"high", "normal"} {
			for id := range 12 {
				partitions = append(partitions, kafka.Partition{Topic: topic, ID: id})
			}
		}
		rand.Shuffle(len(partitions), func(i, j int) { partitions[i], partitions[j] = partitions[j], partitions[i] })
		rand.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })

		got := alignedRange{}.AssignGroups(members, partitions)
		byWorker := map[string]map[string][]int{}
		assigned := 0
		for member, topics := range got {
			worker := member[:len("herald-worker-00")]
			if byWorker[worker] == nil {
				byWorker[worker] = map[string][]int{}
			}
			for topic, ps := range topics {
				slices.Sort(ps)
				byWorker[worker][topic] = ps
				assigned += len(ps)
			}
		}
		if assigned != 24 {
			t.Errorf("%d workers: %d partitions assigned, want 24", workers, assigned)
		}
		for worker, topics := range byWorker {
			if !slices.Equal(topics["high"], topics["normal"]) {
				t.Errorf("%d workers: %s holds high %v but normal %v", workers, worker, topics["high"], topics["normal"])
			}
		}
	}
	// kafka-go's own range balancer does not align them (what the fault-injection suite ran into).
	members := []kafka.GroupMember{{ID: "a-high", Topics: []string{"high"}}, {ID: "a-normal", Topics: []string{"normal"}},
		{ID: "b-high", Topics: []string{"high"}}, {ID: "b-normal", Topics: []string{"normal"}}}
	partitions := []kafka.Partition{{Topic: "high", ID: 1}, {Topic: "high", ID: 0}, {Topic: "normal", ID: 0}, {Topic: "normal", ID: 1}}
	plain := kafka.RangeGroupBalancer{}.AssignGroups(members, partitions)
	if slices.Equal(plain["a-high"]["high"], plain["a-normal"]["normal"]) {
		t.Error("kafka-go's range balancer aligned shuffled partitions; alignedRange may no longer be needed")
	}
}
