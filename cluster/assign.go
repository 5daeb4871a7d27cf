package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Replica assignment for new topics and partitions: Kafka's
// AdminUtils.assignReplicasToBrokers, rack-unaware when no broker has a
// rack and rack-aware when every broker has one. It is pure, so the
// broker (CreateTopics, CreatePartitions) and the admin tool (a
// reassignment plan's "generate") compute the same placements.

// ErrIncompleteRackInfo is returned by AssignReplicas when some brokers
// have a rack and others do not. Kafka throws AdminOperationException
// there, which CreateTopics and CreatePartitions answer as
// UNKNOWN_SERVER_ERROR with the message.
var ErrIncompleteRackInfo = errors.New("cluster: not all brokers have rack information for replica rack aware assignment")

// BrokerRack is a broker as replica assignment sees it: its id and its
// broker.rack, "" for none.
type BrokerRack struct {
	ID   int32
	Rack string
}

// AssignReplicas is Kafka's AdminUtils.assignReplicasToBrokers: it places
// partitions firstPartition .. firstPartition+partitions-1, rf replicas
// each, on brokers, and returns partition -> replicas (the first replica is
// the preferred leader).
//
// Without racks (no broker has one), brokers are taken in ascending id
// order; partition p's first replica is brokers[(p+startIndex) mod n] and
// its followers follow it at a distance of 1 + (shift+j) mod (n-1), where
// shift grows by one at each partition id divisible by n after 0.
//
// With racks (every broker has one), the same round-robin runs over the
// rack-alternated broker list (RackAlternatedBrokers), the followers' shift
// is multiplied by the number of racks, and a follower candidate is skipped
// while its rack already holds a replica and some rack holds none, or while
// it already holds one and some broker holds none: one replica per rack
// before any rack gets a second.
//
// Kafka's callers pass a random startIndex and shift (both in [0,n)) for a
// new topic, and fix both for added partitions; a negative startIndex or
// shift here is chosen at random, as Kafka's -1. A negative firstPartition
// counts as 0. Errors wrap ErrInvalidPartitions (partitions < 1),
// ErrInvalidReplicationFactor (rf < 1 or more than the brokers),
// ErrInvalidReplicaAssignment (a broker id listed twice) or
// ErrIncompleteRackInfo.
func AssignReplicas(brokers []BrokerRack, firstPartition, partitions int32, rf int16, startIndex, shift int) (map[int32][]int32, error) {
	n := len(brokers)
	switch {
	case partitions < 1:
		return nil, fmt.Errorf("%w: number of partitions must be larger than 0, got %d", ErrInvalidPartitions, partitions)
	case rf < 1:
		return nil, fmt.Errorf("%w: replication factor must be larger than 0, got %d", ErrInvalidReplicationFactor, rf)
	case int(rf) > n:
		return nil, fmt.Errorf("%w: replication factor: %d larger than available brokers: %d", ErrInvalidReplicationFactor, rf, n)
	}
	withRack := 0
	seen := make(map[int32]bool, n)
	for _, b := range brokers {
		if seen[b.ID] {
			return nil, fmt.Errorf("%w: broker %d listed twice", ErrInvalidReplicaAssignment, b.ID)
		}
		seen[b.ID] = true
		if b.Rack != "" {
			withRack++
		}
	}
	if withRack > 0 && withRack < n {
		return nil, fmt.Errorf("%w: %d of %d brokers have a broker.rack", ErrIncompleteRackInfo, withRack, n)
	}
	if startIndex < 0 {
		startIndex = rand.IntN(n)
	}
	if shift < 0 {
		shift = rand.IntN(n)
	}
	firstPartition = max(0, firstPartition)
	if withRack == 0 {
		ids := make([]int32, n)
		for i, b := range brokers {
			ids[i] = b.ID
		}
		slices.Sort(ids)
		return assignRackUnaware(ids, firstPartition, partitions, int(rf), startIndex, shift), nil
	}
	return assignRackAware(brokers, firstPartition, partitions, int(rf), startIndex, shift), nil
}

// assignRackUnaware is AdminUtils.assignReplicasToBrokersRackUnaware over
// ids in the order given.
func assignRackUnaware(ids []int32, firstPartition, partitions int32, rf, startIndex, shift int) map[int32][]int32 {
	n := len(ids)
	out := make(map[int32][]int32, partitions)
	for p := int(firstPartition); p < int(firstPartition)+int(partitions); p++ {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + startIndex) % n
		replicas := make([]int32, 0, rf)
		replicas = append(replicas, ids[first])
		for j := 0; j < rf-1; j++ {
			replicas = append(replicas, ids[followerIndex(first, shift, j, n)])
		}
		out[int32(p)] = replicas
	}
	return out
}

// assignRackAware is AdminUtils.assignReplicasToBrokersRackAware.
func assignRackAware(brokers []BrokerRack, firstPartition, partitions int32, rf, startIndex, shift int) map[int32][]int32 {
	rackOf := make(map[int32]string, len(brokers))
	for _, b := range brokers {
		rackOf[b.ID] = b.Rack
	}
	racks := make(map[string]bool)
	for _, r := range rackOf {
		racks[r] = true
	}
	numRacks := len(racks)
	list := RackAlternatedBrokers(brokers)
	n := len(list)
	out := make(map[int32][]int32, partitions)
	for p := int(firstPartition); p < int(firstPartition)+int(partitions); p++ {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + startIndex) % n
		leader := list[first]
		replicas := make([]int32, 0, rf)
		replicas = append(replicas, leader)
		racksUsed := map[string]bool{rackOf[leader]: true}
		brokersUsed := map[int32]bool{leader: true}
		k := 0
		for j := 0; j < rf-1; j++ {
			for {
				b := list[followerIndex(first, shift*numRacks, k, n)]
				k++
				r := rackOf[b]
				if (!racksUsed[r] || len(racksUsed) == numRacks) && (!brokersUsed[b] || len(brokersUsed) == n) {
					replicas = append(replicas, b)
					racksUsed[r] = true
					brokersUsed[b] = true
					break
				}
			}
		}
		out[int32(p)] = replicas
	}
	return out
}

// followerIndex is AdminUtils.replicaIndex: the index of follower j of a
// partition whose first replica is at index first, among n brokers.
// It is called only with n >= 2 (rf <= n and rf >= 2).
func followerIndex(first, shift, j, n int) int {
	return (first + 1 + (shift+j)%(n-1)) % n
}

// RackAlternatedBrokers is Kafka's getRackAlternatedBrokerList: the broker
// ids taken one from each rack in turn, racks in name order and each
// rack's brokers in id order, so that racks 1: {0,1,2}, 2: {3,4,5},
// 3: {6,7,8} give 0, 3, 6, 1, 4, 7, 2, 5, 8. A rack that runs out is
// skipped.
func RackAlternatedBrokers(brokers []BrokerRack) []int32 {
	byRack := make(map[string][]int32)
	for _, b := range brokers {
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
	}
	racks := make([]string, 0, len(byRack))
	for r, ids := range byRack {
		slices.SortFunc(ids, cmp.Compare[int32])
		racks = append(racks, r)
	}
	slices.Sort(racks)
	out := make([]int32, 0, len(brokers))
	for round := 0; len(out) < len(brokers); round++ {
		for _, r := range racks {
			if ids := byRack[r]; round < len(ids) {
				out = append(out, ids[round])
			}
		}
	}
	return out
}
