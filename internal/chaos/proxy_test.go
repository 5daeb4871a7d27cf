package chaos

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestProxySlow: with Slow(100 ms, 800 kbit/s) a round trip through the
// proxy takes at least two delays, 100 KB takes at least a second each
// way, and Heal restores full speed.
func TestProxySlow(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	px, err := NewProxy(l.Addr().String(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	c, err := net.Dial("tcp", px.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(n int) time.Duration {
		t.Helper()
		start := time.Now()
		out, in := make([]byte, n), make([]byte, n)
		go func() { _, _ = c.Write(out) }()
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(c, in); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if d := roundTrip(10); d > 100*time.Millisecond {
		t.Fatalf("unshaped round trip took %s", d)
	}
	px.Slow(100*time.Millisecond, 0)
	if d := roundTrip(10); d < 200*time.Millisecond || d > 2*time.Second {
		t.Fatalf("round trip with 100 ms each way took %s, want >= 200 ms", d)
	}
	px.Slow(0, 800_000) // 100,000 bytes a second each way
	if d := roundTrip(100_000); d < 900*time.Millisecond {
		t.Fatalf("100 KB at 800 kbit/s echoed in %s, want >= 0.9 s", d)
	}
	px.Heal()
	if d := roundTrip(100_000); d > 500*time.Millisecond {
		t.Fatalf("after Heal 100 KB echoed in %s", d)
	}
}
