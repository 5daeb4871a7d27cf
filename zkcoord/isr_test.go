package zkcoord

import (
	"context"
	"encoding/binary"
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

// zkFrameProxy is a TCP proxy to ZooKeeper that reads the protocol's
// length-prefixed frames, so that it can lose one setData exactly: either
// the request itself (never applied) or only its reply (applied by the
// server, but the client sees its connection drop). While held, it accepts
// and at once closes every new connection, so a session it cut off
// expires on the server.
type zkFrameProxy struct {
	ln     net.Listener
	target string

	mu   sync.Mutex
	rule *dropRule // armed rule, consumed by the first matching setData
	hold bool
	// holdNext lets one connection through and then holds again: a
	// session expired on the server learns so and gets no new one.
	holdNext bool
	conns    []net.Conn
	wg       sync.WaitGroup
}

// dropRule loses the next setData of a path ending in pathSuffix.
type dropRule struct {
	pathSuffix  string
	beforeApply bool   // lose the request; else let it apply and lose the reply
	onDrop      func() // runs once the frame is swallowed, before the connection closes
	hold        bool   // then refuse connections until Heal
	fired       chan struct{}
}

func newZKFrameProxy(t *testing.T, target string) *zkFrameProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &zkFrameProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *zkFrameProxy) Addr() string { return p.ln.Addr().String() }

// Arm sets the rule for the next matching setData and returns a channel
// closed once it fired.
func (p *zkFrameProxy) Arm(r dropRule) <-chan struct{} {
	r.fired = make(chan struct{})
	p.mu.Lock()
	p.rule = &r
	p.mu.Unlock()
	return r.fired
}

// Heal ends a hold.
func (p *zkFrameProxy) Heal() {
	p.mu.Lock()
	p.hold = false
	p.mu.Unlock()
}

// PassOne ends a hold for one connection only.
func (p *zkFrameProxy) PassOne() {
	p.mu.Lock()
	p.hold, p.holdNext = false, true
	p.mu.Unlock()
}

func (p *zkFrameProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.hold {
			p.mu.Unlock()
			c.Close()
			continue
		}
		if p.holdNext {
			p.holdNext, p.hold = false, true
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		pc := &proxiedConn{p: p, client: c, server: up}
		p.wg.Add(2)
		go func() { defer p.wg.Done(); pc.clientToServer() }()
		go func() { defer p.wg.Done(); pc.serverToClient() }()
	}
}

// proxiedConn is one client connection and its upstream.
type proxiedConn struct {
	p              *zkFrameProxy
	client, server net.Conn

	mu      sync.Mutex
	pending *dropRule // a forwarded setData whose reply is to be lost
	xid     int32
}

func (c *proxiedConn) closeBoth() {
	c.client.Close()
	c.server.Close()
}

// readFrame reads one length-prefixed frame, returning it whole and its body.
func readFrame(r io.Reader) (frame, body []byte, err error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, nil, err
	}
	frame = make([]byte, 4+binary.BigEndian.Uint32(n[:]))
	copy(frame, n[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, nil, err
	}
	return frame, frame[4:], nil
}

const opSetData = 5 // ZooKeeper's OpCode.setData

// setDataPath returns the path of a setData request body, or false.
func setDataPath(body []byte) (int32, string, bool) {
	if len(body) < 12 || int32(binary.BigEndian.Uint32(body[4:8])) != opSetData {
		return 0, "", false
	}
	n := int(binary.BigEndian.Uint32(body[8:12]))
	if len(body) < 12+n {
		return 0, "", false
	}
	return int32(binary.BigEndian.Uint32(body[0:4])), string(body[12 : 12+n]), true
}

func (c *proxiedConn) clientToServer() {
	defer c.closeBoth()
	// The first frame is the ConnectRequest, which has no request header.
	frame, _, err := readFrame(c.client)
	if err != nil {
		return
	}
	if _, err := c.server.Write(frame); err != nil {
		return
	}
	for {
		frame, body, err := readFrame(c.client)
		if err != nil {
			return
		}
		if xid, path, ok := setDataPath(body); ok {
			c.p.mu.Lock()
			r := c.p.rule
			if r != nil && strings.HasSuffix(path, r.pathSuffix) {
				c.p.rule = nil
			} else {
				r = nil
			}
			c.p.mu.Unlock()
			if r != nil && r.beforeApply {
				c.fire(r)
				return
			}
			if r != nil {
				c.mu.Lock()
				c.pending, c.xid = r, xid
				c.mu.Unlock()
			}
		}
		if _, err := c.server.Write(frame); err != nil {
			return
		}
	}
}

func (c *proxiedConn) serverToClient() {
	defer c.closeBoth()
	frame, _, err := readFrame(c.server) // the ConnectResponse
	if err != nil {
		return
	}
	if _, err := c.client.Write(frame); err != nil {
		return
	}
	for {
		frame, body, err := readFrame(c.server)
		if err != nil {
			return
		}
		if len(body) >= 4 {
			xid := int32(binary.BigEndian.Uint32(body[0:4]))
			c.mu.Lock()
			r := c.pending
			if r != nil && xid == c.xid {
				c.pending = nil
			} else {
				r = nil
			}
			c.mu.Unlock()
			if r != nil {
				c.fire(r) // the reply is swallowed: the client never sees it
				return
			}
		}
		if _, err := c.client.Write(frame); err != nil {
			return
		}
	}
}

// fire runs a rule that just swallowed a frame; the caller then closes
// the connection.
func (c *proxiedConn) fire(r *dropRule) {
	if r.onDrop != nil {
		r.onDrop()
	}
	if r.hold {
		c.p.mu.Lock()
		c.p.hold = true
		c.p.mu.Unlock()
	}
	close(r.fired)
}

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
