package coordlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type walked struct {
	h          Header
	offset     int64
	key, value []byte
}

func walkAll(t *testing.T, b []byte, opts WalkOptions) ([]walked, int64, error) {
	t.Helper()
	var out []walked
	next, err := Walk(b, opts, func(h Header, offset int64, key, value []byte) {
		out = append(out, walked{h, offset, key, value})
	})
	return out, next, err
}

// TestEncodeBatchRoundTrip: every codec, with and without a producer,
// gives a batch whose header is Kafka's form for a coordinator write and
// whose records, tombstone included, Walk reads back in order.
func TestEncodeBatchRoundTrip(t *testing.T) {
	recs := []Record{{Key: []byte("k1"), Value: []byte("v1")}, {Key: []byte("k2")}, {Key: []byte("k3"), Value: []byte{}}}
	for _, codec := range []int8{0, 1, 2, 3, 4} {
		for _, producer := range []*Producer{nil, {ID: 7, Epoch: 3}} {
			t.Run(fmt.Sprintf("codec=%d/txn=%v", codec, producer != nil), func(t *testing.T) {
				b, err := EncodeBatch(recs, 777, codec, producer)
				if err != nil {
					t.Fatal(err)
				}
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(b); err != nil {
					t.Fatal(err)
				}
				wantAttrs, wantID, wantEpoch := int16(codec), int64(-1), int16(-1)
				if producer != nil {
					wantAttrs |= AttrTransactional
					wantID, wantEpoch = producer.ID, producer.Epoch
				}
				if rb.Magic != 2 || rb.Attributes != wantAttrs || rb.ProducerID != wantID || rb.ProducerEpoch != wantEpoch ||
					rb.FirstSequence != -1 || rb.PartitionLeaderEpoch != -1 || rb.NumRecords != 3 || rb.LastOffsetDelta != 2 ||
					rb.FirstTimestamp != 777 || rb.MaxTimestamp != 777 || int(rb.Length) != len(b)-12 {
					t.Fatalf("batch header %+v", rb)
				}
				if crc32.Checksum(b[21:], castagnoli) != uint32(rb.CRC) {
					t.Fatal("CRC32C wrong")
				}
				binary.BigEndian.PutUint64(b[0:8], 10)
				got, next, err := walkAll(t, b, WalkOptions{Strict: true})
				if err != nil || next != 13 || len(got) != 3 {
					t.Fatalf("walk: next %d, %d records, err %v", next, len(got), err)
				}
				for i, w := range got {
					if w.offset != int64(10+i) || !bytes.Equal(w.key, recs[i].Key) || !bytes.Equal(w.value, recs[i].Value) ||
						(w.value == nil) != (recs[i].Value == nil) || w.h.Transactional != (producer != nil) || w.h.ProducerID != wantID {
						t.Fatalf("record %d: %+v, want %+v", i, w, recs[i])
					}
				}
			})
		}
	}
	if _, err := EncodeBatch(recs, 0, 7, nil); err == nil {
		t.Fatal("codec 7 encoded")
	}
}

// TestWalkStrict: a flipped bit and a length field below a batch header
// are errors wrapping ErrCorrupt with Strict, returned with the offset
// after the last good batch; without it the flipped bit goes unnoticed
// and the short length ends the walk as a partial tail would. A batch cut
// off by the end of b ends the walk without an error either way.
func TestWalkStrict(t *testing.T) {
	one, _ := EncodeBatch([]Record{{Key: []byte("a")}}, 1, CodecNone, nil)
	second, _ := EncodeBatch([]Record{{Key: []byte("b"), Value: []byte("v")}}, 1, CodecNone, nil)
	binary.BigEndian.PutUint64(second[0:8], 1)
	whole := append(append([]byte(nil), one...), second...)
	for _, strict := range []bool{false, true} {
		opts := WalkOptions{Strict: strict}
		for cut := len(one) + 1; cut < len(whole); cut++ {
			if got, next, err := walkAll(t, whole[:cut], opts); err != nil || next != 1 || len(got) != 1 {
				t.Fatalf("strict %v, cut at %d: next %d, %d records, err %v", strict, cut, next, len(got), err)
			}
		}
		flipped := append([]byte(nil), whole...)
		flipped[len(flipped)-2] ^= 1 // in the value "v"
		_, next, err := walkAll(t, flipped, opts)
		if strict && (!errors.Is(err, ErrCorrupt) || next != 1) || !strict && (err != nil || next != 2) {
			t.Fatalf("strict %v, flipped bit: next %d err %v", strict, next, err)
		}
		for _, length := range []int32{-1, 0, 12, 48} {
			b := append([]byte(nil), whole...)
			binary.BigEndian.PutUint32(b[len(one)+8:], uint32(length))
			_, next, err := walkAll(t, b, opts)
			if next != 1 || strict != errors.Is(err, ErrCorrupt) || !strict && err != nil {
				t.Fatalf("strict %v, length %d: next %d err %v", strict, length, next, err)
			}
		}
	}
}

// TestWalkControl: a control batch's records reach fn with Control set,
// unless SkipControl, which skips the batch (even one whose records do
// not decode) but moves past it.
func TestWalkControl(t *testing.T) {
	ctl, _ := EncodeBatch([]Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0, 0, 0, 0, 5}}}, 1, CodecNone, &Producer{ID: 9})
	binary.BigEndian.PutUint16(ctl[21:23], uint16(AttrTransactional|AttrControl))
	binary.BigEndian.PutUint32(ctl[17:21], crc32.Checksum(ctl[21:], castagnoli))
	got, next, err := walkAll(t, ctl, WalkOptions{Strict: true})
	if err != nil || next != 1 || len(got) != 1 || !got[0].h.Control || got[0].h.ProducerID != 9 {
		t.Fatalf("control batch: next %d err %v got %+v", next, err, got)
	}
	if got, next, err := walkAll(t, ctl, WalkOptions{Strict: true, SkipControl: true}); err != nil || next != 1 || len(got) != 0 {
		t.Fatalf("skipped control batch: next %d err %v got %+v", next, err, got)
	}
	// Records that do not decode: the count says two, there is one.
	bad := append([]byte(nil), ctl...)
	binary.BigEndian.PutUint32(bad[57:61], 2)
	binary.BigEndian.PutUint32(bad[17:21], crc32.Checksum(bad[21:], castagnoli))
	if _, _, err := walkAll(t, bad, WalkOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("undecodable control batch read: %v", err)
	}
	if _, next, err := walkAll(t, bad, WalkOptions{SkipControl: true}); err != nil || next != 1 {
		t.Fatalf("undecodable control batch skipped: next %d err %v", next, err)
	}
}
