package consume

import (
	"cmp"
	"slices"

	"github.com/segmentio/kafka-go"
)

// alignedRange is kafka-go's range assignment over partitions sorted by number. Every message is keyed by
// its chat (queue.NewOutgoing), so a chat's high- and normal-priority messages have the same partition
// number on both topics; a worker's two readers (one per topic) have member ids that sort together (both
// begin with the worker's client id). With partitions in number order, partition n of both topics goes to
// the same worker, and one worker paces each chat. kafka-go's range balancer takes partitions in the order
// the broker lists them, which need not be by number (kfake's is random), so it alone does not align them.
type alignedRange struct{}

func (alignedRange) ProtocolName() string { return "herald-aligned-range" }

func (alignedRange) UserData() ([]byte, error) { return nil, nil }

func (alignedRange) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	sorted := slices.Clone(partitions)
	slices.SortFunc(sorted, func(a, b kafka.Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.ID, b.ID))
	})
	return kafka.RangeGroupBalancer{}.AssignGroups(members, sorted)
}

// groupBalancers: the aligned range first; plain range keeps a group working while it has members of an
// older release (the coordinator picks a protocol every member supports).
var groupBalancers = []kafka.GroupBalancer{alignedRange{}, kafka.RangeGroupBalancer{}}
