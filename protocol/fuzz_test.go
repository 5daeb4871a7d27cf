package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecodeRequest feeds arbitrary bytes to the connection's decoder
// (readFrame, then parseRequest), delivered in two reads split at a fuzzed
// point as a socket might. Seeds are one valid frame per advertised key
// and version, built with kmsg, plus hostile size prefixes.
//
// It asserts that decoding never panics; that a size prefix above the
// limit is refused without allocating the claimed size, and no input makes
// the decoder allocate more than a small multiple of its own length; that
// keys outside the table are errors; and that a decoded body survives
// encode -> decode -> encode unchanged.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range supportedAPIs {
		for v := r.min; v <= r.max; v++ {
			req := kmsg.RequestForKey(r.key)
			req.SetVersion(v)
			f.Add(encodeRequest(int32(v), "fuzz", req), uint16(7))
		}
	}
	f.Add(encodeRequest(1, "x", produceRequest(9, -1, 100, "t", 0, makeBatch(0, "a", "b"))), uint16(30))
	f.Add(encodeRequest(1, "x", fetchRequest(12, 100, 1, "t", 0, 0)), uint16(3))
	for _, req := range interBrokerSeeds() {
		f.Add(encodeRequest(3, "broker-2", req), uint16(11))
	}
	for _, req := range txnSeeds() {
		f.Add(encodeRequest(4, "txn", req), uint16(13))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint16(2))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0}, uint16(1))
	f.Add([]byte{0, 0, 0, 10, 0x7f, 0xff, 0, 0, 0, 0, 0, 1, 0, 0}, uint16(5))

	const maxBytes = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		cut := int(split) % (len(data) + 1)
		r := &twoReads{parts: [][]byte{data[:cut], data[cut:]}}

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		frame, ferr := readFrame(r, maxBytes)
		var (
			req  *request
			perr error
		)
		if ferr == nil {
			req, perr = parseRequest(frame, supportedAPIs)
		}
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc

		if len(data) >= 4 {
			if size := int32(binary.BigEndian.Uint32(data)); size > maxBytes || size < 0 {
				if ferr == nil {
					t.Fatalf("size %d accepted", size)
				}
				if allocated > 64<<10 {
					t.Fatalf("refused size %d but allocated %d bytes", size, allocated)
				}
			}
		}
		if limit := uint64(256*len(data) + 256<<10); allocated > limit {
			t.Fatalf("decoding %d bytes allocated %d (limit %d)", len(data), allocated, limit)
		}
		if ferr != nil {
			if req != nil {
				t.Fatal("request returned with a frame error")
			}
			return
		}
		if req != nil {
			if _, _, ok := findVersions(supportedAPIs, req.key); !ok && !errors.Is(perr, errUnknownKey) {
				t.Fatalf("key %d outside the table: err %v", req.key, perr)
			}
		}
		if perr != nil || req.kreq == nil {
			return
		}

		enc1 := req.kreq.AppendTo(nil)
		again := kmsg.RequestForKey(req.key)
		again.SetVersion(req.version)
		if err := again.ReadFrom(enc1); err != nil {
			t.Fatalf("key %d v%d: re-decoding our own encoding: %v", req.key, req.version, err)
		}
		if enc2 := again.AppendTo(nil); !bytes.Equal(enc1, enc2) {
			t.Fatalf("key %d v%d: encode/decode not stable:\n%x\n%x", req.key, req.version, enc1, enc2)
		}
	})
}

// twoReads returns its parts one Read at a time, like a socket delivering
// a frame in two segments.
type twoReads struct{ parts [][]byte }

func (r *twoReads) Read(p []byte) (int, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}
