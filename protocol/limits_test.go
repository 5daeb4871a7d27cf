package protocol

// Connection limits (reliability.md §7 rows 5 and 32, issue 6 item 5):
// connections.max.idle.ms closes idle, half-open and stalled connections;
// queued.max.request.bytes bounds the frame bytes being read or handled
// over all connections; max.connections and max.connections.per.ip bound
// connections. Each test uses small values so that it runs in well under
// a second or two.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

func apiVersions() kmsg.Request {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	return req
}

// closedWithin asserts the server closes c within d (and not at once if
// notBefore > 0).
func closedWithin(t *testing.T, c net.Conn, notBefore, d time.Duration) {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	switch {
	case err == nil:
		t.Fatal("read a byte, want the connection closed")
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("connection still open after %v", d)
	case time.Since(start) < notBefore:
		t.Fatalf("connection closed after %v, before %v", time.Since(start), notBefore)
	}
}

func TestConnectionsMaxIdle(t *testing.T) {
	const idle = 300 * time.Millisecond
	b := startBroker(t, func(c *Config) { c.ConnectionsMaxIdle = idle })

	t.Run("never sends", func(t *testing.T) {
		t.Parallel()
		closedWithin(t, b.dial(t).c, idle/2, 5*time.Second)
	})
	t.Run("stalls inside a frame", func(t *testing.T) {
		t.Parallel()
		c := b.dial(t)
		c.c.Write([]byte{0, 0, 3, 232, 0, 18, 0, 0, 0, 0}) // 1000 bytes announced, 6 sent
		closedWithin(t, c.c, idle/2, 5*time.Second)
	})
	t.Run("trickles a frame", func(t *testing.T) {
		t.Parallel()
		// One byte every idle/3 keeps every single read short of the idle
		// time, but the frame as a whole must arrive within it.
		c := b.dial(t)
		frame := encodeRequest(1, "slow", apiVersions())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for _, x := range frame {
				if _, err := c.c.Write([]byte{x}); err != nil {
					return
				}
				time.Sleep(idle / 3)
			}
		}()
		closedWithin(t, c.c, idle/2, 5*time.Second)
		<-done
	})
	t.Run("active stays open", func(t *testing.T) {
		t.Parallel()
		c := b.dial(t)
		for range 6 {
			c.roundTrip(apiVersions())
			time.Sleep(idle / 2)
		}
	})
	t.Run("waiting request is not idle", func(t *testing.T) {
		t.Parallel()
		// A long-polling Fetch parks the connection for longer than the
		// idle time; it is answered, not closed.
		b.replicas.addPartition(cluster.TopicPartition{Topic: "idle", Partition: 0})
		c := b.dial(t)
		resp := c.roundTrip(fetchRequest(11, int32(2*idle/time.Millisecond), 1, "idle", 0, 0)).(*kmsg.FetchResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("fetch error %d", code)
		}
		c.roundTrip(apiVersions())
	})
}

func TestQueuedMaxRequestBytes(t *testing.T) {
	const budget = 100 << 10
	b := startBroker(t, func(c *Config) { c.QueuedMaxRequestBytes = budget })
	b.replicas.addPartition(cluster.TopicPartition{Topic: "q", Partition: 0})
	srv := b.srv
	waitInUse := func(t *testing.T, want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for srv.budget.inUse() != want {
			if time.Now().After(deadline) {
				t.Fatalf("budget in use %d, want %d", srv.budget.inUse(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	produce := func(acks int16, size int) kmsg.Request {
		return produceRequest(9, acks, 5000, "q", 0, makeBatch(1, string(bytes.Repeat([]byte("v"), size))))
	}

	t.Run("a stalled frame holds its size and blocks others", func(t *testing.T) {
		stalled := b.dial(t)
		stalled.c.Write(binary.BigEndian.AppendUint32(nil, 80<<10))
		stalled.c.Write([]byte{0, 18, 0, 0, 0, 0, 0, 1})
		waitInUse(t, 80<<10)

		other := b.dial(t)
		corr := other.send(produce(1, 30<<10))
		other.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		var one [1]byte
		if _, err := other.c.Read(one[:]); err == nil {
			t.Fatal("a request that does not fit the budget was answered")
		}
		stalled.c.Close() // frees its 80 KiB: the waiting frame goes on
		got, _, err := other.readFrame(true)
		if err != nil || got != corr {
			t.Fatalf("after the budget freed: correlation id %d, err %v", got, err)
		}
		waitInUse(t, 0)
	})
	t.Run("a frame larger than the budget is served alone", func(t *testing.T) {
		c := b.dial(t)
		resp := c.roundTrip(produce(1, 150<<10)).(*kmsg.ProduceResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce error %d", code)
		}
		waitInUse(t, 0)
	})
	t.Run("acks=all waiting holds no budget", func(t *testing.T) {
		b.replicas.setHoldHW(true)
		defer b.replicas.setHoldHW(false)
		waiting := b.dial(t)
		corr := waiting.send(produce(-1, 80<<10))
		waitInUse(t, 0) // appended, now waiting for the high watermark
		c := b.dial(t)
		c.roundTrip(produce(1, 80<<10))
		b.replicas.setHoldHW(false)
		if got, _, err := waiting.readFrame(true); err != nil || got != corr {
			t.Fatalf("acks=all produce: correlation id %d, err %v", got, err)
		}
	})
}

func TestMaxConnectionsPerIP(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.MaxConnectionsPerIP = 2 })
	first, second := b.dial(t), b.dial(t)
	first.roundTrip(apiVersions())
	second.roundTrip(apiVersions())
	b.dial(t).expectClosed()
	first.c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(encodeRequest(1, "raw", apiVersions()))
		c.SetReadDeadline(time.Now().Add(time.Second))
		var size [4]byte
		_, err = c.Read(size[:])
		c.Close()
		if err == nil {
			break // a slot was free again
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection accepted after one of two closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	second.roundTrip(apiVersions())
}

func TestMaxConnections(t *testing.T) {
	b := startBroker(t, func(c *Config) { c.MaxConnections = 2; c.InterBrokerListener = "REPLICATION" })
	first, second := b.dial(t), b.dial(t)
	first.roundTrip(apiVersions())
	second.roundTrip(apiVersions())
	// The third connects (the kernel's backlog) but is not accepted, so
	// its request waits until a slot frees.
	third := b.dial(t)
	corr := third.send(apiVersions())
	third.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var one [1]byte
	if _, err := third.c.Read(one[:]); err == nil {
		t.Fatal("a connection beyond max.connections was served")
	}
	first.c.Close()
	if got, _, err := third.readFrame(false); err != nil || got != corr {
		t.Fatalf("after a slot freed: correlation id %d, err %v", got, err)
	}
}

func TestByteBudget(t *testing.T) {
	bb := newByteBudget(10)
	ctx := context.Background()
	if n, _ := bb.acquire(ctx, 8); n != 8 {
		t.Fatalf("acquired %d, want 8", n)
	}
	// A large waiter comes first: a small one behind it waits too, even
	// though it would fit (no starvation of large frames).
	big := make(chan int64)
	go func() { n, _ := bb.acquire(ctx, 100); big <- n }() // capped at 10
	for {
		bb.mu.Lock()
		n := len(bb.waiters)
		bb.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := bb.acquire(cctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("small acquire behind a large waiter: %v, want a timeout", err)
	}
	bb.release(8)
	if n := <-big; n != 10 {
		t.Fatalf("large acquire took %d, want the capacity 10", n)
	}
	bb.release(10)
	if got := bb.inUse(); got != 0 {
		t.Fatalf("in use %d after releasing everything", got)
	}
	if n, err := newByteBudget(-1).acquire(ctx, 1<<40); n != 0 || err != nil {
		t.Fatalf("unbounded budget: %d, %v", n, err)
	}
}

func TestBufPool(t *testing.T) {
	for _, n := range []int{0, 1, 4096, 4097, 1 << 20, 3 << 20} {
		b := getBuf(n)
		if cap(b) < n || len(b) != 0 {
			t.Fatalf("getBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		putBuf(append(b, 1))
	}
	if b := pooledBuf(1 << 30); b != nil {
		t.Fatal("pooledBuf above the largest class returned a buffer")
	}
}
