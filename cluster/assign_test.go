package cluster

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

// racks turns Kafka's test brokerRackMapping into brokers, in id order.
func racks(m map[int32]string) []BrokerRack {
	out := make([]BrokerRack, 0, len(m))
	for id, r := range m {
		out = append(out, BrokerRack{ID: id, Rack: r})
	}
	slices.SortFunc(out, func(a, b BrokerRack) int { return int(a.ID - b.ID) })
	return out
}

func noRacks(ids ...int32) []BrokerRack {
	out := make([]BrokerRack, len(ids))
	for i, id := range ids {
		out[i] = BrokerRack{ID: id}
	}
	return out
}

// TestRackAlternatedBrokers is Kafka's
// testGetRackAlternatedBrokerListAndAssignReplicasToBrokers (the list part).
func TestRackAlternatedBrokers(t *testing.T) {
	m := map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	if got := RackAlternatedBrokers(racks(m)); !slices.Equal(got, []int32{0, 3, 1, 5, 4, 2}) {
		t.Fatalf("got %v", got)
	}
	delete(m, 5)
	if got := RackAlternatedBrokers(racks(m)); !slices.Equal(got, []int32{0, 3, 1, 4, 2}) {
		t.Fatalf("without 5: got %v", got)
	}
	// The order the brokers are given in does not matter.
	in := racks(map[int32]string{8: "c", 0: "a", 3: "b", 6: "c", 1: "a", 4: "b", 2: "a", 5: "b", 7: "c"})
	slices.Reverse(in)
	if got := RackAlternatedBrokers(in); !slices.Equal(got, []int32{0, 3, 6, 1, 4, 7, 2, 5, 8}) {
		t.Fatalf("3x3: got %v", got)
	}
}

// TestAssignReplicasFixed pins assignments for a fixed start index and
// shift: Kafka's AdminRackAwareTest and AdminTest expectations, and the
// rack-unaware cases this broker pinned before.
func TestAssignReplicasFixed(t *testing.T) {
	sixRacked := racks(map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"})
	cases := []struct {
		name        string
		brokers     []BrokerRack
		first, n    int32
		rf          int16
		start, shft int
		want        map[int32][]int32
	}{
		{"kafka rack aware 6 brokers 7x3", sixRacked, 0, 7, 3, 0, 0, map[int32][]int32{
			0: {0, 3, 1}, 1: {3, 1, 5}, 2: {1, 5, 4}, 3: {5, 4, 2}, 4: {4, 2, 0}, 5: {2, 0, 3}, 6: {0, 4, 2}}},
		{"kafka AdminTest 5 brokers 10x3", noRacks(0, 1, 2, 3, 4), 0, 10, 3, 0, 0, map[int32][]int32{
			0: {0, 1, 2}, 1: {1, 2, 3}, 2: {2, 3, 4}, 3: {3, 4, 0}, 4: {4, 0, 1},
			5: {0, 2, 3}, 6: {1, 3, 4}, 7: {2, 4, 0}, 8: {3, 0, 1}, 9: {4, 1, 2}}},
		{"unsorted ids are sorted first", noRacks(14, 10, 12, 13, 11), 0, 5, 3, 0, 0, map[int32][]int32{
			0: {10, 11, 12}, 1: {11, 12, 13}, 2: {12, 13, 14}, 3: {13, 14, 10}, 4: {14, 10, 11}}},
		{"single broker", noRacks(7), 0, 3, 1, 0, 0, map[int32][]int32{0: {7}, 1: {7}, 2: {7}}},
		{"start and shift", noRacks(1, 2, 3), 0, 4, 2, 2, 1, map[int32][]int32{
			0: {3, 2}, 1: {1, 3}, 2: {2, 1}, 3: {3, 1}}},
		// Partitions numbered from 3 of 3 brokers: the shift has grown
		// once already at partition 3.
		{"from partition 3", noRacks(1, 2, 3), 3, 2, 2, 0, 0, map[int32][]int32{3: {1, 3}, 4: {2, 1}}},
		{"rack aware from partition 6", sixRacked, 6, 1, 3, 0, 0, map[int32][]int32{6: {0, 4, 2}}},
		{"negative first partition counts as 0", noRacks(1, 2), -5, 1, 2, 0, 0, map[int32][]int32{0: {1, 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := AssignReplicas(c.brokers, c.first, c.n, c.rf, c.start, c.shft)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v\nwant %v", got, c.want)
			}
		})
	}
}

// distribution is Kafka's RackAwareTest.getReplicaDistribution.
type distribution struct {
	partitionRacks map[int32][]string
	leaders        map[int32]int
	replicas       map[int32]int
}

func distributionOf(a map[int32][]int32, rackOf map[int32]string) distribution {
	d := distribution{map[int32][]string{}, map[int32]int{}, map[int32]int{}}
	for p, rs := range a {
		d.leaders[rs[0]]++
		for _, b := range rs {
			d.replicas[b]++
			d.partitionRacks[p] = append(d.partitionRacks[p], rackOf[b])
		}
	}
	return d
}

func distinct(s []string) int {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return len(m)
}

// checkDistribution is Kafka's RackAwareTest.checkReplicaDistribution:
// never a broker twice in a partition; with rackAware, rf distinct racks
// in each partition; with leaders, numPartitions/numBrokers preferred
// leaders on every broker; with replicas, numPartitions*rf/numBrokers
// replicas on every broker.
func checkDistribution(t *testing.T, a map[int32][]int32, rackOf map[int32]string, partitions, rf int, rackAware, leaders, replicas bool) {
	t.Helper()
	if len(a) != partitions {
		t.Fatalf("%d partitions assigned, want %d", len(a), partitions)
	}
	for p, rs := range a {
		if len(rs) != rf {
			t.Fatalf("partition %d: %v, want %d replicas", p, rs, rf)
		}
		s := slices.Clone(rs)
		slices.Sort(s)
		if len(slices.Compact(s)) != len(rs) {
			t.Fatalf("partition %d: a broker twice in %v", p, rs)
		}
	}
	d := distributionOf(a, rackOf)
	if rackAware {
		for p, rs := range d.partitionRacks {
			if distinct(rs) != rf {
				t.Fatalf("partition %d: replicas %v on racks %v, want %d racks", p, a[p], rs, rf)
			}
		}
	}
	n := len(rackOf)
	if leaders {
		for b := range rackOf {
			if d.leaders[b] != partitions/n {
				t.Fatalf("broker %d leads %d partitions, want %d: %v", b, d.leaders[b], partitions/n, a)
			}
		}
	}
	if replicas {
		for b := range rackOf {
			if d.replicas[b] != partitions*rf/n {
				t.Fatalf("broker %d has %d replicas, want %d: %v", b, d.replicas[b], partitions*rf/n, a)
			}
		}
	}
}

// TestAssignReplicasRackAwareDistribution ports Kafka's AdminRackAwareTest
// distribution cases. Where Kafka draws the start index and shift at
// random, every pair in [0,n) is tried.
func TestAssignReplicasRackAwareDistribution(t *testing.T) {
	twoPerRack := map[int32]string{0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
	cases := []struct {
		name                        string
		rackOf                      map[int32]string
		first, partitions           int32
		rf                          int16
		fixed                       int // -1: all start/shift pairs
		rackAware, leaders, replica bool
	}{
		{"testAssignmentWithRackAware", twoPerRack, 0, 6, 3, 2, true, true, true},
		{"testAssignmentWithRackAwareWithRandomStartIndex", twoPerRack, 0, 6, 3, -1, true, true, true},
		{"testAssignmentWithRackAwareWithUnevenReplicas", twoPerRack, 0, 13, 3, 0, true, false, false},
		{"testAssignmentWithRackAwareWithUnevenRacks",
			map[int32]string{0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 0, 12, 3, -1, true, true, false},
		{"testAssignmentWith2ReplicasRackAware", twoPerRack, 0, 12, 2, -1, true, true, true},
		{"testRackAwareExpansion",
			map[int32]string{6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}, 12, 12, 2, -1, true, true, true},
		{"testAssignmentWith2ReplicasRackAwareWith6Partitions", twoPerRack, 0, 6, 2, -1, true, true, true},
		{"testAssignmentWith2ReplicasRackAwareWith6PartitionsAnd3Brokers",
			map[int32]string{0: "rack1", 1: "rack2", 4: "rack3"}, 0, 3, 2, -1, true, true, true},
		{"testLargeNumberPartitionsAssignment", map[int32]string{0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
			6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}, 0, 96, 3, -1, true, true, true},
		{"testSkipBrokerWithReplicaAlreadyAssigned",
			map[int32]string{0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}, 0, 6, 4, 2, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			brokers := racks(c.rackOf)
			pairs := [][2]int{{c.fixed, c.fixed}}
			if c.fixed < 0 {
				pairs = nil
				for s := range brokers {
					for h := range brokers {
						pairs = append(pairs, [2]int{s, h})
					}
				}
			}
			for _, pr := range pairs {
				a, err := AssignReplicas(brokers, c.first, c.partitions, c.rf, pr[0], pr[1])
				if err != nil {
					t.Fatal(err)
				}
				for p := c.first; p < c.first+c.partitions; p++ {
					if _, ok := a[p]; !ok {
						t.Fatalf("start %d shift %d: partition %d missing from %v", pr[0], pr[1], p, a)
					}
				}
				checkDistribution(t, a, c.rackOf, int(c.partitions), int(c.rf), c.rackAware, c.leaders, c.replica)
			}
		})
	}
}

// TestAssignReplicasRackCounts ports testMoreReplicasThanRacks,
// testLessReplicasThanRacks and testSingleRack: each partition spans
// min(rf, racks) racks, whatever the start.
func TestAssignReplicasRackCounts(t *testing.T) {
	cases := []struct {
		name   string
		rackOf map[int32]string
		rf     int16
		racks  int
	}{
		{"more replicas than racks", map[int32]string{0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}, 5, 3},
		{"less replicas than racks", map[int32]string{0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}, 2, 2},
		{"single rack", map[int32]string{0: "rack1", 1: "rack1", 2: "rack1", 3: "rack1", 4: "rack1", 5: "rack1"}, 3, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for s := 0; s < 6; s++ {
				for h := 0; h < 6; h++ {
					a, err := AssignReplicas(racks(c.rackOf), 0, 6, c.rf, s, h)
					if err != nil {
						t.Fatal(err)
					}
					d := distributionOf(a, c.rackOf)
					for p := int32(0); p < 6; p++ {
						if len(a[p]) != int(c.rf) || distinct(d.partitionRacks[p]) != c.racks {
							t.Fatalf("start %d shift %d partition %d: %v on racks %v, want %d racks", s, h, p, a[p], d.partitionRacks[p], c.racks)
						}
					}
					if c.racks == 1 {
						for b := range c.rackOf {
							if d.leaders[b] != 1 {
								t.Fatalf("single rack: broker %d leads %d", b, d.leaders[b])
							}
						}
					}
				}
			}
		})
	}
}

// TestAssignReplicasThreeRacksRandom is the property: 6 brokers in
// 3 racks, RF 3, every partition on 3 racks and every rack holding each
// partition once, for many random starts (negative start and shift), and
// for partitions added from a random first partition id.
func TestAssignReplicasThreeRacksRandom(t *testing.T) {
	rackOf := map[int32]string{1: "r1", 2: "r2", 3: "r3", 4: "r1", 5: "r2", 6: "r3"}
	brokers := racks(rackOf)
	for i := 0; i < 2000; i++ {
		first := int32(i % 37)
		a, err := AssignReplicas(brokers, first, 12, 3, -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != 12 {
			t.Fatalf("got %d partitions", len(a))
		}
		for p, rs := range a {
			var got []string
			for _, b := range rs {
				got = append(got, rackOf[b])
			}
			if len(rs) != 3 || distinct(got) != 3 || p < first || p >= first+12 {
				t.Fatalf("partition %d: %v on racks %v", p, rs, got)
			}
		}
	}
}

// TestAssignReplicasInvalid is Kafka's testReplicaAssignment and
// testAssignReplicasToBrokersWithInvalidParameters.
func TestAssignReplicasInvalid(t *testing.T) {
	mixed := []BrokerRack{{0, "rack1"}, {1, "rack3"}, {2, "rack3"}, {3, "rack2"}, {4, ""}}
	cases := []struct {
		name       string
		brokers    []BrokerRack
		partitions int32
		rf         int16
		want       error
	}{
		{"0 partitions", mixed, 0, 1, ErrInvalidPartitions},
		{"0 replication factor", mixed, 10, 0, ErrInvalidReplicationFactor},
		{"rf above brokers", mixed, 10, 6, ErrInvalidReplicationFactor},
		{"rf above brokers, no racks", noRacks(0, 1, 2, 3, 4), 10, 6, ErrInvalidReplicationFactor},
		{"no brokers", nil, 1, 1, ErrInvalidReplicationFactor},
		{"some brokers without rack", mixed, 10, 5, ErrIncompleteRackInfo},
		{"duplicate broker", []BrokerRack{{1, "a"}, {1, "b"}}, 1, 2, ErrInvalidReplicaAssignment},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := AssignReplicas(c.brokers, 0, c.partitions, c.rf, 0, 0)
			if !errors.Is(err, c.want) || a != nil {
				t.Fatalf("got %v, %v; want %v", a, err, c.want)
			}
		})
	}
}
