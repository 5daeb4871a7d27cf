package protocol

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// countingConn counts the writes that reach the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestWriteFrameCoalescesTLSRecords: a 1 MiB response on a TLS connection
// reaches the socket in a handful of writes (tls.Conn alone writes each
// 16 KiB record by itself: 64 or more), and arrives intact; writes outside
// writeFrame (the handshake, close_notify) are not held back.
func TestWriteFrameCoalescesTLSRecords(t *testing.T) {
	tc := benchTLS(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := make([]byte, 1<<20)
	rand.Read(want)
	got := make(chan []byte, 1)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			got <- nil
			return
		}
		cc := tlsClient(nc, tc.ClientConfig("127.0.0.1"))
		defer cc.Close()
		b, _ := io.ReadAll(cc)
		got <- b
	}()
	raw, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cnt := &countingConn{Conn: raw}
	cfg, err := tc.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	sc := tlsServer(cnt, cfg)
	if err := sc.Handshake(); err != nil { // not corked: must not hang
		t.Fatal(err)
	}
	before := cnt.writes.Load()
	if err := writeFrame(sc, want); err != nil {
		t.Fatal(err)
	}
	writes := cnt.writes.Load() - before
	if max := int64(len(want)/tlsWriteBytes + 2); writes > max {
		t.Errorf("1 MiB response took %d socket writes, want at most %d", writes, max)
	}
	sc.Close() // close_notify, uncorked: the reader sees EOF
	if b := <-got; !bytes.Equal(b, want) {
		t.Errorf("peer read %d bytes, not the %d written", len(b), len(want))
	}
}
