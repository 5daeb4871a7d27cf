package logstore

import (
	"encoding/binary"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestBuildParseControlBatch(t *testing.T) {
	t.Parallel()
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		b := BuildControlBatch(42, 7, 13, typ, 1234)
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatalf("%v: ValidateBatch: %v", typ, err)
		}
		if h.Attributes != 0x30 || !h.IsControl() || !h.IsTransactional() {
			t.Errorf("%v: attributes %#x, want 0x30", typ, h.Attributes)
		}
		if h.BaseOffset != 0 || h.LastOffsetDelta != 0 || h.NumRecords != 1 || h.ProducerID != 42 ||
			h.ProducerEpoch != 7 || h.BaseSequence != -1 || h.FirstTimestamp != 1234 || h.MaxTimestamp != 1234 {
			t.Errorf("%v: header %+v", typ, h)
		}
		gotTyp, epoch, err := ParseControlBatch(b)
		if err != nil || gotTyp != typ || epoch != 13 {
			t.Errorf("ParseControlBatch = %v, %d, %v; want %v, 13", gotTyp, epoch, err, typ)
		}
		// The exact record bytes of Kafka's EndTransactionMarker.
		key, value, ok := firstControlRecord(b[BatchHeaderSize:])
		if !ok || len(key) != 4 || binary.BigEndian.Uint16(key) != 0 || int16(binary.BigEndian.Uint16(key[2:])) != int16(typ) {
			t.Errorf("%v: key %x", typ, key)
		}
		if len(value) != 6 || binary.BigEndian.Uint16(value) != 0 || binary.BigEndian.Uint32(value[2:]) != 13 {
			t.Errorf("%v: value %x", typ, value)
		}
	}
}

func TestParseControlBatchRejects(t *testing.T) {
	t.Parallel()
	good := BuildControlBatch(1, 0, 0, ControlCommit, 0)
	flip := func(i int) []byte { b := append([]byte(nil), good...); b[i] ^= 1; return b }
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"data batch":   {simpleBatch(1, 0), ErrInvalidRecord},
		"bad crc":      {flip(len(good) - 1), ErrCorrupt},
		"short":        {good[:BatchHeaderSize-1], ErrCorrupt},
		"truncated":    {good[:len(good)-1], ErrCorrupt},
		"empty":        {nil, ErrCorrupt},
		"unknown type": {BuildControlBatch(1, 0, 0, ControlType(3), 0), ErrInvalidRecord},
	}
	for name, c := range cases {
		if _, _, err := ParseControlBatch(c.b); !errorsIs(err, c.want) {
			t.Errorf("%s: error %v, want %v", name, err, c.want)
		}
	}
	// A cleaned, empty control batch has no marker.
	var empty [BatchHeaderSize]byte
	writeEmptyBatch(empty[:], 5, 0, 0, 1, 0, -1, attrControl|attrTransactional, 0)
	if _, _, err := ParseControlBatch(empty[:]); !errorsIs(err, ErrInvalidRecord) {
		t.Errorf("empty control batch: %v", err)
	}
}

func TestAppendControlAsLeader(t *testing.T) {
	t.Parallel()
	l := openLog(t, t.TempDir(), testConfig(t), 0)
	mustAppend(t, l, simpleBatch(3, 10))
	info, err := l.AppendControlAsLeader(BuildControlBatch(9, 2, 5, ControlAbort, 20), 4)
	if err != nil {
		t.Fatal(err)
	}
	if info.FirstOffset != 3 || info.LastOffset != 3 || info.NumRecords != 1 {
		t.Fatalf("info %+v", info)
	}
	b, err := l.Read(3, 1<<20, 100)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ValidateBatch(b)
	if err != nil || h.BaseOffset != 3 || h.PartitionLeaderEpoch != 4 || !h.IsControl() {
		t.Fatalf("read back %+v, %v", h, err)
	}
	if typ, epoch, err := ParseControlBatch(b); err != nil || typ != ControlAbort || epoch != 5 {
		t.Fatalf("read back marker %v %d %v", typ, epoch, err)
	}
	if e, ok := l.LeaderEpochs().LatestEpoch(); !ok || e != 4 {
		t.Fatalf("latest epoch %d %v", e, ok)
	}
	// Clients still may not append control batches, and the control path
	// takes only markers.
	if _, err := l.AppendAsLeader(BuildControlBatch(9, 2, 5, ControlAbort, 20), 4, -1); !errorsIs(err, ErrInvalidRecord) {
		t.Fatalf("client control batch: %v", err)
	}
	if _, err := l.AppendControlAsLeader(simpleBatch(1, 0), 4); !errorsIs(err, ErrInvalidRecord) {
		t.Fatalf("data batch on the control path: %v", err)
	}
	two := append(BuildControlBatch(9, 2, 5, ControlAbort, 20), BuildControlBatch(9, 2, 5, ControlAbort, 20)...)
	if _, err := l.AppendControlAsLeader(two, 4); !errorsIs(err, ErrInvalidRecord) {
		t.Fatalf("two control batches: %v", err)
	}
	if l.LogEndOffset() != 4 {
		t.Fatalf("LEO %d after refused appends", l.LogEndOffset())
	}
}

// FuzzParseControlBatch: any bytes either parse as a marker, one that a
// control append then takes, or fail with ErrCorrupt or ErrInvalidRecord;
// never a panic.
func FuzzParseControlBatch(f *testing.F) {
	f.Add(BuildControlBatch(1, 2, 3, ControlAbort, 4))
	f.Add(BuildControlBatch(-1, -1, -1, ControlCommit, -1))
	f.Add(simpleBatch(1, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, _, err := ParseControlBatch(b)
		if err != nil {
			if !errorsIs(err, ErrCorrupt) && !errorsIs(err, ErrInvalidRecord) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrInvalidRecord", err)
			}
			return
		}
		if typ != ControlAbort && typ != ControlCommit {
			t.Fatalf("parsed type %d", typ)
		}
	})
}

// FuzzLoadTxnIndex: any .txnindex bytes open, or fail with ErrCorrupt
// naming the file; what opens collects without panicking and holds only
// whole entries in order.
func FuzzLoadTxnIndex(f *testing.F) {
	f.Add(encodeAbortedTxns([]AbortedTxn{{1, 0, 2, 3}, {2, 1, 4, 5}}))
	f.Add(encodeAbortedTxns([]AbortedTxn{{1, 0, 2, 3}})[:20])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		const dir = "/p-0"
		m := NewMemFS()
		cfg := testConfig(t)
		cfg.Log = zerolog.Nop()
		cfg.FS = m
		l, err := Open(dir, cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range 6 {
			if _, err := l.AppendAsLeader(simpleBatch(1, 0), 0, -1); err != nil {
				t.Fatal(err)
			}
		}
		must(t, l.Close())
		name := segPath(dir, 0, txnIndexSuffix)
		f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		must(t, err)
		_, err = f.Write(raw)
		must(t, err)
		must(t, f.Close())
		l, err = Open(dir, cfg, 0)
		if err != nil {
			if !errorsIs(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		defer l.Close()
		got, err := l.CollectAbortedTxns(math.MinInt64, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range got {
			if e.LastOffset >= 6 || (i > 0 && e.LastOffset <= got[i-1].LastOffset) {
				t.Fatalf("entries %+v", got)
			}
		}
	})
}

// TestParseControlBatchVersions: later key and value versions are read as
// version 0, as Kafka reads them; negative ones are refused.
func TestParseControlBatchVersions(t *testing.T) {
	t.Parallel()
	// withVersions rewrites the key and value versions of a built marker.
	withVersions := func(keyV, valueV int16) []byte {
		b := BuildControlBatch(3, 1, 77, ControlAbort, 5)
		key, value, _ := firstControlRecord(b[BatchHeaderSize:])
		binary.BigEndian.PutUint16(key, uint16(keyV))
		binary.BigEndian.PutUint16(value, uint16(valueV))
		binary.BigEndian.PutUint32(b[offCRC:], crc32Castagnoli(b[offAttributes:]))
		return b
	}
	for _, c := range []struct {
		keyV, valueV int16
		ok           bool
	}{{0, 0, true}, {1, 0, true}, {0, 3, true}, {-1, 0, false}, {0, -1, false}} {
		typ, epoch, err := ParseControlBatch(withVersions(c.keyV, c.valueV))
		if c.ok && (err != nil || typ != ControlAbort || epoch != 77) {
			t.Errorf("versions %d/%d: %v %d %v", c.keyV, c.valueV, typ, epoch, err)
		}
		if !c.ok && !errorsIs(err, ErrInvalidRecord) {
			t.Errorf("versions %d/%d: error %v, want ErrInvalidRecord", c.keyV, c.valueV, err)
		}
	}
}
