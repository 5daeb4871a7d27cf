package protocol

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// logEnd is the fake's log end offset of tp.
func (f *fakeReplicas) logEnd(tp cluster.TopicPartition) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.parts[tp]; l != nil {
		return l.leo
	}
	return -1
}

// waitLogEnd waits up to 5 s for tp's log end offset to reach want.
func waitLogEnd(t *testing.T, f *fakeReplicas, tp cluster.TopicPartition, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.logEnd(tp) < want {
		if time.Now().After(deadline) {
			t.Fatalf("log end offset %d, want %d", f.logEnd(tp), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expectNoResponse asserts nothing arrives on c within d.
func expectNoResponse(t *testing.T, c *rawConn, d time.Duration) {
	t.Helper()
	c.c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	n, err := c.c.Read(b[:])
	if ne, ok := err.(net.Error); n > 0 || !ok || !ne.Timeout() {
		t.Fatalf("a response arrived early (read %d bytes, err %v)", n, err)
	}
}

// TestProducePipelined: acks=all Produce requests on one connection are
// appended while earlier ones wait for replication, at most
// maxPendingProduces waiting at once; a request of another kind waits
// until they are answered; every response leaves in request order.
func TestProducePipelined(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	b.replicas.setHoldHW(true)
	defer b.replicas.setHoldHW(false)

	c := b.dial(t)
	const n = maxPendingProduces + 3
	var corrs []int32
	for range n {
		corrs = append(corrs, c.send(produceRequest(9, -1, 30000, "t", 0, makeBatch(0, "x"))))
	}
	// With the HW held, one request at a time would stop at one append.
	// The connection appends maxPendingProduces while they wait, plus one
	// more whose handler then waits for a slot.
	waitLogEnd(t, b.replicas, tp, maxPendingProduces+1)
	time.Sleep(100 * time.Millisecond)
	if got := b.replicas.logEnd(tp); got != maxPendingProduces+1 {
		t.Fatalf("log end offset %d while the HW is held, want %d (the bound on waiting produces)", got, maxPendingProduces+1)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mdCorr := c.send(md)
	expectNoResponse(t, c, 200*time.Millisecond)

	b.replicas.setHoldHW(false)
	for i, want := range corrs {
		got, body, err := c.readFrame(true)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if got != want {
			t.Fatalf("response %d has correlation id %d, want %d", i, got, want)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != int64(i) {
			t.Fatalf("response %d: error %d, base offset %d, want 0 and %d", i, p.ErrorCode, p.BaseOffset, i)
		}
	}
	if got, _, err := c.readFrame(true); err != nil || got != mdCorr {
		t.Fatalf("after the produces: correlation id %d (%v), want the Metadata's %d", got, err, mdCorr)
	}
}
