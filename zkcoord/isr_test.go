package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/internal/zktest"
	"github.com/kafkazk/broker/partition"
)

// TestZKWriteLeaderAndIsrUnknownOutcome: an ISR write whose request or
// reply is lost on the way has an unknown outcome, not a failed one
// (Kafka's retryRequestsUntilConnected and checkLeaderAndIsrZkData). The
// leader's session reaches ZooKeeper through a proxy that loses one
// setData of the state znode; WriteLeaderAndIsr must reconnect and find
// out what happened: a write that landed is a success with the znode's new
// zkVersion, a write that did not is retried, a znode that someone else
// changed meanwhile is a conflict. After a session expiry it only reads
// back. And a state without a zkVersion is never written unconditionally.
func TestZKWriteLeaderAndIsrUnknownOutcome(t *testing.T) {
	srv := zktest.Start(t)
	proxy := newZKFrameProxy(t, srv.Addr)
	cfg := testConfig(t, proxy.Addr()+srv.Chroot, 1)
	cfg.SessionTimeout = 2 * time.Second
	s := connect(t, cfg)
	raw := rawConn(t, srv.Connect())

	seq := 0
	// newState creates a fresh topic's partition-0 state znode (leader 1,
	// ISR [1], leader epoch 3) at zkVersion 0; the topic has no assignment
	// znode data, so no controller acts on it.
	newState := func(t *testing.T) (cluster.TopicPartition, cluster.LeaderAndIsr) {
		t.Helper()
		// Start each case with the session connected, whatever the one
		// before left behind.
		eventually(t, 30*time.Second, func() error {
			if st := s.zk.c.State(); st != zk.StateHasSession {
				return fmt.Errorf("session state %v", st)
			}
			return nil
		})
		seq++
		tp := cluster.TopicPartition{Topic: fmt.Sprintf("isr-%d", seq), Partition: 0}
		st := cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 3, Isr: []int32{1}, ControllerEpoch: 2}
		for _, p := range []string{topicPath(tp.Topic), partitionsPath(tp.Topic), partitionPath(tp.Topic, 0)} {
			if err := raw.createPersistent(p); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatal(err)
			}
		}
		if _, err := raw.Create(partitionStatePath(tp.Topic, 0), encodePartitionState(st), 0); err != nil {
			t.Fatal(err)
		}
		return tp, st
	}
	stored := func(t *testing.T, tp cluster.TopicPartition) cluster.LeaderAndIsr {
		t.Helper()
		data, stat, err := raw.Get(partitionStatePath(tp.Topic, tp.Partition))
		if err != nil {
			t.Fatal(err)
		}
		st, err := decodePartitionState(data, stat.Version)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	expand := func(st cluster.LeaderAndIsr) cluster.LeaderAndIsr {
		st.Isr = []int32{1, 2}
		return st
	}
	write := func(tp cluster.TopicPartition, st cluster.LeaderAndIsr) (int32, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return s.WriteLeaderAndIsr(ctx, tp, st)
	}
	mustFire := func(t *testing.T, fired <-chan struct{}) {
		t.Helper()
		select {
		case <-fired:
		default:
			t.Fatal("the proxy lost no setData: the test did not test anything")
		}
	}
	// expireWhileHeld makes the test wait, while the proxy holds the
	// leader's session off, until ZooKeeper has expired it, then heals.
	probe := func(t *testing.T) string {
		t.Helper()
		p := fmt.Sprintf("/probe-%d", seq)
		if _, err := s.zk.Create(p, nil, zk.FlagEphemeral); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// awaitExpiry waits until ZooKeeper has removed probePath, the
	// ephemeral of the leader's session, or until ctx ends.
	awaitExpiry := func(ctx context.Context, probePath string) {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if ok, _, err := raw.Exists(probePath); err == nil && !ok {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	healOnExpiry := func(t *testing.T, probePath string, fired <-chan struct{}) {
		var wg sync.WaitGroup
		ctx := t.Context() // done before Cleanup: the goroutine cannot outlive the subtest
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-fired:
			case <-ctx.Done():
				return
			}
			awaitExpiry(ctx, probePath)
			proxy.Heal()
		}()
		t.Cleanup(wg.Wait)
	}

	t.Run("reply lost after apply", func(t *testing.T) {
		tp, st := newState(t)
		fired := proxy.Arm(dropRule{pathSuffix: partitionStatePath(tp.Topic, 0)})
		v, err := write(tp, expand(st))
		mustFire(t, fired)
		if err != nil || v != 1 {
			t.Fatalf("WriteLeaderAndIsr = %d, %v; want zk_version 1: the write landed", v, err)
		}
		if got := stored(t, tp); !slices.Equal(got.Isr, []int32{1, 2}) || got.ZkVersion != 1 {
			t.Fatalf("stored %+v", got)
		}
	})
	t.Run("request lost before apply", func(t *testing.T) {
		tp, st := newState(t)
		fired := proxy.Arm(dropRule{pathSuffix: partitionStatePath(tp.Topic, 0), beforeApply: true})
		v, err := write(tp, expand(st))
		mustFire(t, fired)
		if err != nil || v != 1 {
			t.Fatalf("WriteLeaderAndIsr = %d, %v; want zk_version 1 after a retry", v, err)
		}
		if got := stored(t, tp); !slices.Equal(got.Isr, []int32{1, 2}) || got.ZkVersion != 1 {
			t.Fatalf("stored %+v", got)
		}
	})
	t.Run("reply lost, then changed by the controller", func(t *testing.T) {
		tp, st := newState(t)
		p := partitionStatePath(tp.Topic, 0)
		ctrl := cluster.LeaderAndIsr{Leader: 1, LeaderEpoch: 4, Isr: []int32{1}, ControllerEpoch: 2}
		fired := proxy.Arm(dropRule{pathSuffix: p, onDrop: func() {
			if _, err := raw.Set(p, encodePartitionState(ctrl), 1); err != nil {
				t.Errorf("controller write: %v", err)
			}
		}})
		v, err := write(tp, expand(st))
		mustFire(t, fired)
		if !errors.Is(err, partition.ErrStateConflict) {
			t.Fatalf("WriteLeaderAndIsr = %d, %v; want ErrStateConflict: the znode moved on", v, err)
		}
		if got := stored(t, tp); got.LeaderEpoch != 4 || got.ZkVersion != 2 {
			t.Fatalf("stored %+v", got)
		}
		// The conflict carries the state read back, for the leader to
		// judge whether it is its own.
		var sc *partition.StateConflictError
		if !errors.As(err, &sc) {
			t.Fatalf("WriteLeaderAndIsr error %v carries no *partition.StateConflictError", err)
		}
		if got := sc.Stored; got.Leader != 1 || got.LeaderEpoch != 4 || !slices.Equal(got.Isr, []int32{1}) ||
			got.ControllerEpoch != 2 || got.ZkVersion != 2 {
			t.Fatalf("conflict's stored state %+v, want the controller's at zk_version 2", got)
		}
	})
	t.Run("reply lost, then session expired", func(t *testing.T) {
		tp, st := newState(t)
		pr := probe(t)
		fired := proxy.Arm(dropRule{pathSuffix: partitionStatePath(tp.Topic, 0), hold: true})
		healOnExpiry(t, pr, fired)
		oldSession := s.SessionID()
		v, err := write(tp, expand(st))
		mustFire(t, fired)
		if s.SessionID() == oldSession {
			t.Fatal("the session did not expire")
		}
		if err != nil || v != 1 {
			t.Fatalf("WriteLeaderAndIsr = %d, %v; want zk_version 1: the read-back shows the write", v, err)
		}
	})
	t.Run("request lost, then session expired", func(t *testing.T) {
		tp, st := newState(t)
		pr := probe(t)
		fired := proxy.Arm(dropRule{pathSuffix: partitionStatePath(tp.Topic, 0), beforeApply: true, hold: true})
		healOnExpiry(t, pr, fired)
		v, err := write(tp, expand(st))
		mustFire(t, fired)
		if err == nil || errors.Is(err, partition.ErrStateConflict) || !errors.Is(err, zk.ErrSessionExpired) {
			t.Fatalf("WriteLeaderAndIsr = %d, %v; want a session-expired error: not written", v, err)
		}
		if got := stored(t, tp); !slices.Equal(got.Isr, []int32{1}) || got.ZkVersion != 0 {
			t.Fatalf("stored %+v", got)
		}
	})
	t.Run("written while the new session is not yet there", func(t *testing.T) {
		// Right after an expiry go-zookeeper reports session id 0 until a
		// new session exists. A write begun then that loses its
		// connection is retried, not taken for one the expiry cut off.
		tp, st := newState(t)
		pr := probe(t)
		cut := proxy.Arm(dropRule{pathSuffix: pr, beforeApply: true, hold: true})
		if _, err := s.zk.c.Set(pr, nil, -1); err == nil {
			t.Fatal("the probe write went through the cut")
		}
		mustFire(t, cut)
		awaitExpiry(t.Context(), pr)
		proxy.PassOne() // the client learns of the expiry, then is held off again
		eventually(t, 20*time.Second, func() error {
			if id := s.zk.c.SessionID(); id != 0 {
				return fmt.Errorf("session id %d", id)
			}
			return nil
		})
		fired := proxy.Arm(dropRule{pathSuffix: partitionStatePath(tp.Topic, 0), beforeApply: true})
		done := make(chan struct{})
		var (
			v   int32
			err error
		)
		go func() {
			defer close(done)
			v, err = write(tp, expand(st))
		}()
		time.Sleep(300 * time.Millisecond) // the write has read the session id 0
		proxy.Heal()
		<-done
		if err != nil || v != 1 {
			t.Fatalf("WriteLeaderAndIsr = %d, %v; want zk_version 1: no session had expired since it began", v, err)
		}
		select {
		case <-fired:
		default:
			t.Log("the write failed while no server answered and was retried (ErrNoServer)")
		}
		if got := stored(t, tp); !slices.Equal(got.Isr, []int32{1, 2}) || got.ZkVersion != 1 {
			t.Fatalf("stored %+v", got)
		}
	})
	t.Run("no zkVersion", func(t *testing.T) {
		tp, st := newState(t)
		st = expand(st)
		st.ZkVersion = -1
		v, err := write(tp, st)
		if !errors.Is(err, partition.ErrStateConflict) {
			t.Fatalf("WriteLeaderAndIsr at zk_version -1 = %d, %v; want ErrStateConflict, never an unconditional write", v, err)
		}
		if got := stored(t, tp); !slices.Equal(got.Isr, []int32{1}) || got.ZkVersion != 0 {
			t.Fatalf("stored %+v", got)
		}
	})
}

// fourLetter sends a ZooKeeper four-letter command and returns the answer.
func fourLetter(t *testing.T, addr, cmd string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestZKNoPartitionStateWatches: brokers learn partition states from the
// controller's LeaderAndIsr and UpdateMetadata (the protocol's metadata
// cache), as in Kafka, so no session watches a partition state znode:
// one watch per partition per broker and N reads per ISR change fed a
// cache nobody served from. ZooKeeper's wchp lists the watched paths.
func TestZKNoPartitionStateWatches(t *testing.T) {
	srv := zktest.Start(t)
	s1 := startBroker(t, srv.Connect(), 1)
	s2 := startBroker(t, srv.Connect(), 2)
	eventually(t, 10*time.Second, func() error {
		if len(s1.Brokers()) != 2 || s1.ControllerID() < 0 {
			return errors.New("cluster not up")
		}
		return nil
	})
	ctx := context.Background()
	if err := s1.CreateTopic(ctx, TopicSpec{Name: "watched", NumPartitions: 3, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv.Connect())
	for p := int32(0); p < 3; p++ {
		mustGet(t, raw, partitionStatePath("watched", p))
	}
	for _, s := range []*Session{s1, s2} {
		eventually(t, 10*time.Second, func() error {
			if _, ok := s.TopicConfig("watched"); !ok {
				return errors.New("the topic is not in the session's cache")
			}
			return nil
		})
		// The session goroutine finishes what it was reading (the whole
		// topic) before it runs this.
		if err := s.do(ctx, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	watches := fourLetter(t, srv.Addr, "wchp")
	if !strings.Contains(watches, "/brokers/topics/watched") {
		t.Fatalf("wchp lists no watch of the topic, so it shows nothing: %s", watches)
	}
	for _, line := range strings.Split(watches, "\n") {
		if strings.HasSuffix(strings.TrimSpace(line), "/state") {
			t.Errorf("partition state watched: %s", strings.TrimSpace(line))
		}
	}
}
