package logstore

import (
	"bytes"
	"testing"
)

// TestReadChunkedScan checks Read's chunked scan against the batches as
// appended: batches of varied sizes (some larger than a scan chunk), a
// sparse index so that scans cross chunk boundaries, every offset read
// with a small and a large maxBytes, and AppendRead appending after
// existing bytes.
func TestReadChunkedScan(t *testing.T) {
	cfg := testConfig(t)
	cfg.IndexIntervalBytes = 1 << 20 // one index entry per MiB: long scans
	l := openLog(t, t.TempDir(), cfg, 0)
	type stored struct {
		first, last int64
		raw         []byte
	}
	var batches []stored
	for i := range 200 {
		spec := batchSpec{records: 1 + i%7, valueSize: 10 + (i*37)%300, firstTs: int64(i)}
		if i%50 == 7 {
			spec.valueSize = readChunkBytes // a batch larger than a chunk
		}
		b := makeBatch(spec)
		info := mustAppend(t, l, b)
		batches = append(batches, stored{info.FirstOffset, info.LastOffset, b})
	}
	leo := l.LogEndOffset()
	prefix := []byte("prefix")
	for _, maxBytes := range []int32{1, 40 << 10} {
		for off := int64(0); off < leo; off++ {
			got, err := l.Read(off, maxBytes, leo)
			if err != nil {
				t.Fatalf("Read(%d, %d): %v", off, maxBytes, err)
			}
			// The expected bytes: whole batches from the one holding off,
			// at least one, then while within maxBytes.
			var want []byte
			for _, b := range batches {
				if b.last < off {
					continue
				}
				if len(want) > 0 && len(want)+len(b.raw) > int(maxBytes) {
					break
				}
				want = append(want, b.raw...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Read(%d, %d): %d bytes, want %d", off, maxBytes, len(got), len(want))
			}
			dst := append(make([]byte, 0, 8), prefix...)
			app, err := l.AppendRead(dst, off, maxBytes, leo)
			if err != nil || !bytes.Equal(app[:len(prefix)], prefix) || !bytes.Equal(app[len(prefix):], want) {
				t.Fatalf("AppendRead(%d, %d): %d bytes, err %v", off, maxBytes, len(app), err)
			}
		}
	}
	if got, err := l.Read(leo, 1<<20, leo); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("Read at the log end offset: %v, %v; want an empty non-nil slice", got, err)
	}
}
