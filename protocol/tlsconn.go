package protocol

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
)

// TLS transport buffering: the socket under a tls.Conn.
//
// tls.Conn writes every record of at most 16 KiB with a write system call
// of its own (it buffers only during the handshake), so a 1 MiB fetch
// response was 64 writes on SSL against one on PLAINTEXT, and it reads
// the socket one record at a time. recordConn sits between the tls.Conn
// and the TCP socket: while the connection's writer holds it corked
// (writeTLS), records are gathered and written in writes of up to
// tlsWriteBytes; reads go through a buffer of tlsReadBytes, so one read
// takes many records. Kafka's SslTransportLayer does the same with its
// application and network buffers.

const (
	// tlsWriteBytes: corked records are written once this many are
	// gathered, and at the end of the response.
	tlsWriteBytes = 256 << 10
	// tlsReadBytes is the read buffer under the tls.Conn: 4 records, so
	// one read takes several, at a cost per connection kept small.
	tlsReadBytes = 64 << 10
)

// recordConn is the TCP connection under a tls.Conn, buffering both ways.
type recordConn struct {
	net.Conn
	br *bufio.Reader

	mu     sync.Mutex // writes: the tls.Conn's (records, alerts) and flush
	corked bool
	wbuf   []byte // records gathered while corked, pooled
}

func newRecordConn(nc net.Conn) *recordConn {
	return &recordConn{Conn: nc, br: bufio.NewReaderSize(nc, tlsReadBytes)}
}

func (c *recordConn) Read(p []byte) (int, error) { return c.br.Read(p) }

// Write is the tls.Conn's: straight to the socket unless corked.
func (c *recordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return c.Conn.Write(p)
	}
	if len(c.wbuf)+len(p) > tlsWriteBytes {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	if c.wbuf == nil {
		c.wbuf = getBuf(tlsWriteBytes)
	}
	c.wbuf = append(c.wbuf, p...)
	return len(p), nil
}

func (c *recordConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what is gathered and gives the buffer back.
func (c *recordConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	err := c.flushLocked()
	putBuf(c.wbuf)
	c.wbuf = nil
	return err
}

func (c *recordConn) flushLocked() error {
	if len(c.wbuf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.wbuf)
	c.wbuf = c.wbuf[:0]
	return err
}

// tlsServer and tlsClient wrap nc in a recordConn, then in TLS.
func tlsServer(nc net.Conn, cfg *tls.Config) *tls.Conn { return tls.Server(newRecordConn(nc), cfg) }

func tlsClient(nc net.Conn, cfg *tls.Config) *tls.Conn { return tls.Client(newRecordConn(nc), cfg) }

// writeFrame writes b to nc: on a TLS connection over a recordConn, its
// records gathered into as few socket writes as tlsWriteBytes allows.
func writeFrame(nc net.Conn, b []byte) error {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		_, err := nc.Write(b)
		return err
	}
	rc, ok := tc.NetConn().(*recordConn)
	if !ok {
		_, err := tc.Write(b)
		return err
	}
	rc.cork()
	_, err := tc.Write(b)
	if ferr := rc.uncork(); err == nil {
		err = ferr
	}
	return err
}
