package logstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"testing"

	"github.com/kafkazk/broker/internal/recordcodec"
)

// kv is one record for kvBatch. A nil value is a tombstone; noKey makes the
// key null.
type kv struct {
	key, value []byte
	noKey      bool
	headers    [][2][]byte
}

func k(key, value string) kv { return kv{key: []byte(key), value: []byte(value)} }
func tomb(key string) kv     { return kv{key: []byte(key)} }

// kvOpts are a kvBatch's batch-level fields.
type kvOpts struct {
	codec         int8
	producerID    int64 // 0 means -1 (no producer)
	producerEpoch int16
	baseSequence  int32
	ts            int64 // first timestamp; record i has ts+i
}

func appendVarBytes(b []byte, v []byte, null bool) []byte {
	if null {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// kvBatch builds a v2 batch (base offset 0) of recs, compressed with
// o.codec through recordcodec.
func kvBatch(t testing.TB, o kvOpts, recs ...kv) []byte {
	t.Helper()
	var section []byte
	for i, r := range recs {
		var rec []byte
		rec = append(rec, 0)
		rec = binary.AppendVarint(rec, int64(i))
		rec = binary.AppendVarint(rec, int64(i))
		rec = appendVarBytes(rec, r.key, r.noKey)
		rec = appendVarBytes(rec, r.value, r.value == nil)
		rec = binary.AppendVarint(rec, int64(len(r.headers)))
		for _, h := range r.headers {
			rec = appendVarBytes(rec, h[0], false)
			rec = appendVarBytes(rec, h[1], h[1] == nil)
		}
		section = binary.AppendVarint(section, int64(len(rec)))
		section = append(section, rec...)
	}
	b := make([]byte, BatchHeaderSize)
	if o.codec != 0 {
		var err error
		if b, err = recordcodec.Compress(o.codec, b, section); err != nil {
			t.Fatal(err)
		}
	} else {
		b = append(b, section...)
	}
	pid, pepoch, seq := o.producerID, o.producerEpoch, o.baseSequence
	if pid == 0 {
		pid, pepoch, seq = -1, -1, -1
	}
	be := binary.BigEndian
	be.PutUint32(b[offBatchLength:], uint32(len(b)-batchLengthOverhead))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(o.codec))
	be.PutUint32(b[offLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[offFirstTimestamp:], uint64(o.ts))
	be.PutUint64(b[offMaxTimestamp:], uint64(o.ts+int64(len(recs))-1))
	be.PutUint64(b[offProducerID:], uint64(pid))
	be.PutUint16(b[offProducerEpoch:], uint16(pepoch))
	be.PutUint32(b[offBaseSequence:], uint32(seq))
	be.PutUint32(b[offNumRecords:], uint32(len(recs)))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// gotRecord is a record as read back from a log.
type gotRecord struct {
	offset   int64
	key      string
	value    string
	tomb     bool
	hasKey   bool
	raw      string // the record's bytes, headers included
	codec    int8
	batchPID int64
}

// logContents reads the whole log, checking each batch's CRC and that
// offsets only increase, and returns its records and batch headers.
func logContents(t testing.TB, l *Log) ([]gotRecord, []BatchHeader) {
	t.Helper()
	var recs []gotRecord
	var hdrs []BatchHeader
	last := int64(-1)
	codecs := recordcodec.Codecs{}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		b, err := l.Read(off, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			t.Fatalf("Read(%d) returned nothing below LEO %d", off, l.LogEndOffset())
		}
		it := NewBatchIter(b)
		for it.Next() {
			h, raw := it.Header(), it.Batch()
			if crc := crc32.Checksum(raw[offAttributes:], castagnoli); crc != h.CRC {
				t.Fatalf("batch at %d: bad CRC", h.BaseOffset)
			}
			if h.BaseOffset <= last {
				t.Fatalf("batch at %d after offset %d: offsets go backwards or repeat", h.BaseOffset, last)
			}
			hdrs = append(hdrs, h)
			section := raw[BatchHeaderSize:]
			if c := h.Compression(); c != 0 && h.NumRecords > 0 {
				if section, err = codecs.Decompress(c, nil, section, 1<<26); err != nil {
					t.Fatalf("batch at %d: %v", h.BaseOffset, err)
				}
			}
			ri := newRecordIter(section)
			n := int32(0)
			for ri.next() {
				r := ri.rec
				o := h.BaseOffset + int64(r.offsetDelta)
				if o <= last || o > h.LastOffset() {
					t.Fatalf("record at %d in batch [%d, %d] after %d", o, h.BaseOffset, h.LastOffset(), last)
				}
				last = o
				g := gotRecord{offset: o, key: string(r.key), hasKey: r.hasKey, tomb: !r.hasValue,
					raw: string(section[r.start:r.end]), codec: h.Compression(), batchPID: h.ProducerID}
				if r.hasValue {
					g.value = recordValue(t, section[r.start:r.end])
				}
				recs = append(recs, g)
				n++
			}
			if ri.err != nil || n != h.NumRecords {
				t.Fatalf("batch at %d: %d records of %d, err %v", h.BaseOffset, n, h.NumRecords, ri.err)
			}
			last = max(last, h.LastOffset())
			off = h.NextOffset()
		}
		if it.Err() != nil {
			t.Fatalf("Read(%d): %v", off, it.Err())
		}
	}
	return recs, hdrs
}

// recordValue extracts the value of one encoded record.
func recordValue(t testing.TB, rec []byte) string {
	_, n := binary.Varint(rec)
	p := n + 1
	for range 2 { // timestamp and offset deltas
		_, n = binary.Varint(rec[p:])
		p += n
	}
	kl, n := binary.Varint(rec[p:])
	p += n + int(max(kl, 0))
	vl, n := binary.Varint(rec[p:])
	p += n
	return string(rec[p : p+int(vl)])
}

// latest is the expected content after a full clean: key -> value of its
// last record, "" with ok=false for a tombstone.
func latestByKey(recs []gotRecord) map[string]gotRecord {
	m := map[string]gotRecord{}
	for _, r := range recs {
		if r.hasKey {
			m[r.key] = r
		}
	}
	return m
}

func cleanCfg(m *OffsetMap) CleanConfig {
	return CleanConfig{UpperOffset: math.MaxInt64, NowMs: 1 << 40, DeleteRetentionMs: 1 << 40, Map: m, Codec: recordcodec.Codecs{}}
}

// mustClean runs passes from firstDirty until the whole cleanable range is
// clean and returns the stats of each pass.
func mustCleanAll(t testing.TB, l *Log, cfg CleanConfig) []CleanStats {
	t.Helper()
	var all []CleanStats
	for i := 0; ; i++ {
		st, err := l.Clean(cfg)
		if err != nil {
			t.Fatalf("Clean pass %d: %v", i, err)
		}
		all = append(all, st)
		if !st.MapFull || i > 1000 {
			return all
		}
		cfg.FirstDirtyOffset = st.EndOffset
	}
}

func keyName(i int) string { return fmt.Sprintf("key-%04d", i) }

var _ = bytes.Equal
