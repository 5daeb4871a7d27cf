package zkcoord

import (
	"reflect"
	"slices"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

func TestElectLeader(t *testing.T) {
	cases := []struct {
		name                  string
		assignment, isr, live []int32
		unclean               bool
		wantLeader            int32
		wantIsr               []int32
		wantOK                bool
	}{
		{"preferred in isr", []int32{1, 2, 3}, []int32{1, 2, 3}, []int32{1, 2, 3}, false, 1, []int32{1, 2, 3}, true},
		{"assignment order not isr order", []int32{3, 1, 2}, []int32{1, 2, 3}, []int32{1, 2, 3}, false, 3, []int32{1, 2, 3}, true},
		{"first dead: next in isr, dead leaves isr", []int32{1, 2, 3}, []int32{1, 2, 3}, []int32{2, 3}, false, 2, []int32{2, 3}, true},
		{"live replica outside isr skipped", []int32{1, 2, 3}, []int32{1, 3}, []int32{2, 3}, false, 3, []int32{3}, true},
		{"isr keeps its own order", []int32{1, 2, 3}, []int32{3, 2, 1}, []int32{2, 3}, false, 2, []int32{3, 2}, true},
		{"only isr member dead, clean: offline, isr unchanged", []int32{1, 2}, []int32{1}, []int32{2}, false, cluster.NoLeader, []int32{1}, false},
		{"only isr member dead, unclean: first live replica", []int32{1, 2, 3}, []int32{1}, []int32{3, 2}, true, 2, []int32{2}, true},
		{"unclean prefers clean when possible", []int32{1, 2, 3}, []int32{3}, []int32{2, 3}, true, 3, []int32{3}, true},
		{"nobody live, unclean", []int32{1, 2}, []int32{1}, nil, true, cluster.NoLeader, []int32{1}, false},
		{"empty isr clean", []int32{1, 2}, nil, []int32{1, 2}, false, cluster.NoLeader, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, isr, ok := ElectLeader(c.assignment, c.isr, c.live, c.unclean)
			if l != c.wantLeader || !slices.Equal(isr, c.wantIsr) || ok != c.wantOK {
				t.Fatalf("got (%d, %v, %v), want (%d, %v, %v)", l, isr, ok, c.wantLeader, c.wantIsr, c.wantOK)
			}
		})
	}
}

func TestElectControlledShutdownLeader(t *testing.T) {
	cases := []struct {
		name                            string
		assignment, isr, live, shutting []int32
		wantLeader                      int32
		wantIsr                         []int32
		wantOK                          bool
	}{
		{"moves to next isr member", []int32{1, 2, 3}, []int32{1, 2, 3}, []int32{1, 2, 3}, []int32{1}, 2, []int32{2, 3}, true},
		{"skips out-of-isr replica", []int32{1, 2, 3}, []int32{1, 3}, []int32{1, 2, 3}, []int32{1}, 3, []int32{3}, true},
		{"skips other shutting-down broker", []int32{1, 2, 3}, []int32{1, 2, 3}, []int32{1, 2, 3}, []int32{1, 2}, 3, []int32{3}, true},
		{"no other isr member", []int32{1, 2}, []int32{1}, []int32{1, 2}, []int32{1}, cluster.NoLeader, []int32{1}, false},
		{"other isr member dead", []int32{1, 2}, []int32{1, 2}, []int32{1}, []int32{1}, cluster.NoLeader, []int32{1, 2}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, isr, ok := ElectControlledShutdownLeader(c.assignment, c.isr, c.live, c.shutting)
			if l != c.wantLeader || !slices.Equal(isr, c.wantIsr) || ok != c.wantOK {
				t.Fatalf("got (%d, %v, %v), want (%d, %v, %v)", l, isr, ok, c.wantLeader, c.wantIsr, c.wantOK)
			}
		})
	}
}

func TestElectPreferredLeader(t *testing.T) {
	if l, ok := ElectPreferredLeader([]int32{2, 1}, []int32{1, 2}, []int32{1, 2}); !ok || l != 2 {
		t.Fatalf("got %d %v", l, ok)
	}
	if _, ok := ElectPreferredLeader([]int32{2, 1}, []int32{1}, []int32{1, 2}); ok {
		t.Fatal("preferred replica outside the ISR elected")
	}
	if _, ok := ElectPreferredLeader([]int32{2, 1}, []int32{1, 2}, []int32{1}); ok {
		t.Fatal("dead preferred replica elected")
	}
}

func TestOfflineTransition(t *testing.T) {
	st := func(leader, epoch int32, isr ...int32) cluster.LeaderAndIsr {
		return cluster.LeaderAndIsr{Leader: leader, LeaderEpoch: epoch, Isr: isr, ControllerEpoch: 1, ZkVersion: 3}
	}
	cases := []struct {
		name             string
		assignment       []int32
		in               cluster.LeaderAndIsr
		alive, electable []int32
		unclean          bool
		want             cluster.LeaderAndIsr
		changed          bool
	}{
		{"healthy", []int32{1, 2, 3}, st(1, 4, 1, 2, 3), []int32{1, 2, 3}, []int32{1, 2, 3}, false, st(1, 4, 1, 2, 3), false},
		{"leader dies", []int32{1, 2, 3}, st(1, 4, 1, 2, 3), []int32{2, 3}, []int32{2, 3}, false, st(2, 5, 2, 3), true},
		{"follower dies", []int32{1, 2, 3}, st(1, 4, 1, 2, 3), []int32{1, 3}, []int32{1, 3}, false, st(1, 5, 1, 3), true},
		{"follower outside isr dies", []int32{1, 2, 3}, st(1, 4, 1, 3), []int32{1, 3}, []int32{1, 3}, false, st(1, 4, 1, 3), false},
		{"last isr member dies, clean", []int32{1, 2}, st(1, 4, 1), []int32{2}, []int32{2}, false, st(-1, 5, 1), true},
		{"already offline stays", []int32{1, 2}, st(-1, 5, 1), []int32{2}, []int32{2}, false, st(-1, 5, 1), false},
		{"offline, unclean now allowed", []int32{1, 2}, st(-1, 5, 1), []int32{2}, []int32{2}, true, st(2, 6, 2), true},
		{"isr member returns", []int32{1, 2}, st(-1, 5, 1), []int32{1, 2}, []int32{1, 2}, false, st(1, 6, 1), true},
		{"leader dies, survivor shutting down", []int32{1, 2}, st(1, 4, 1, 2), []int32{2}, nil, false, st(-1, 5, 2), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, changed, _ := offlineTransition(c.assignment, c.in, c.alive, c.electable, c.unclean)
			if changed != c.changed || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v changed=%v, want %+v changed=%v", got, changed, c.want, c.changed)
			}
		})
	}
}

func TestPreferredElections(t *testing.T) {
	tp := func(p int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: "t", Partition: p} }
	parts := []PartitionLeadership{
		// Broker 1 prefers 0..3 and leads only 0: 3/4 = 75% imbalance.
		{tp(0), []int32{1, 2}, 1, []int32{1, 2}},
		{tp(1), []int32{1, 2}, 2, []int32{1, 2}},
		{tp(2), []int32{1, 2}, 2, []int32{2}}, // 1 not in ISR: not eligible
		{tp(3), []int32{1, 3}, 3, []int32{3, 1}},
		// Broker 2 prefers 4..13 and leads all but one: 10%, not above.
		{tp(4), []int32{2, 1}, 1, []int32{2, 1}},
	}
	for p := int32(5); p < 14; p++ {
		parts = append(parts, PartitionLeadership{tp(p), []int32{2, 1}, 2, []int32{2, 1}})
	}
	got := PreferredElections(parts, []int32{1, 2, 3}, 10)
	if want := []cluster.TopicPartition{tp(1), tp(3)}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := PreferredElections(parts, []int32{2, 3}, 10); len(got) != 0 {
		t.Fatalf("dead preferred broker: got %v", got)
	}
	if got := PreferredElections(parts, []int32{1, 2, 3}, 80); len(got) != 0 {
		t.Fatalf("80%%: got %v", got)
	}
}
