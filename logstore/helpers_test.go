package logstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// batchSpec describes a v2 batch for makeBatch.
type batchSpec struct {
	records     int
	valueSize   int
	firstTs     int64 // record i has timestamp firstTs+i
	maxTs       int64 // header maxTimestamp; 0 means firstTs+records-1
	baseOffset  int64
	leaderEpoch int32
	attributes  int16
}

// makeBatch builds a real v2 record batch: minimal varint-encoded records
// (no key, no headers) behind a header with a correct CRC32C.
func makeBatch(spec batchSpec) []byte {
	if spec.records == 0 {
		spec.records = 1
	}
	if spec.maxTs == 0 {
		spec.maxTs = spec.firstTs + int64(spec.records) - 1
	}
	b := make([]byte, BatchHeaderSize, BatchHeaderSize+spec.records*(spec.valueSize+16))
	for i := 0; i < spec.records; i++ {
		var rec []byte
		rec = append(rec, 0)                     // attributes
		rec = binary.AppendVarint(rec, int64(i)) // timestamp delta
		rec = binary.AppendVarint(rec, int64(i)) // offset delta
		rec = binary.AppendVarint(rec, -1)       // null key
		rec = binary.AppendVarint(rec, int64(spec.valueSize))
		rec = append(rec, bytes.Repeat([]byte{byte('a' + i%26)}, spec.valueSize)...)
		rec = binary.AppendVarint(rec, 0) // no headers
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], uint64(spec.baseOffset))
	be.PutUint32(b[offBatchLength:], uint32(len(b)-batchLengthOverhead))
	be.PutUint32(b[offLeaderEpoch:], uint32(spec.leaderEpoch))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(spec.attributes))
	be.PutUint32(b[offLastOffsetDelta:], uint32(spec.records-1))
	be.PutUint64(b[offFirstTimestamp:], uint64(spec.firstTs))
	be.PutUint64(b[offMaxTimestamp:], uint64(spec.maxTs))
	be.PutUint64(b[offProducerID:], math.MaxUint64) // -1
	be.PutUint16(b[offProducerEpoch:], math.MaxUint16)
	be.PutUint32(b[offBaseSequence:], math.MaxUint32)
	be.PutUint32(b[offNumRecords:], uint32(spec.records))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// simpleBatch is a batch of records records of 10-byte values stamped ts.
func simpleBatch(records int, ts int64) []byte {
	return makeBatch(batchSpec{records: records, valueSize: 10, firstTs: ts})
}

func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t))
	return cfg
}

func openLog(t testing.TB, dir string, cfg Config, recoveryPoint int64) *Log {
	t.Helper()
	l, err := Open(dir, cfg, recoveryPoint)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(b, 0, -1)
	if err != nil {
		t.Fatalf("AppendAsLeader: %v", err)
	}
	return info
}

// readAll reads every batch from offset 0 to the log end, one Read at a
// time, and returns the concatenated bytes.
func readAll(t testing.TB, l *Log) []byte {
	t.Helper()
	var out []byte
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
			h := it.Header()
			if _, err := ValidateBatch(it.Batch()); err != nil {
				t.Fatalf("batch at %d read back invalid: %v", h.BaseOffset, err)
			}
			off = h.NextOffset()
		}
		if it.Err() != nil {
			t.Fatalf("Read(%d) returned a partial batch: %v", off, it.Err())
		}
		out = append(out, b...)
	}
	return out
}

// copyDir copies the regular files of src into a new temp dir.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func segPath(dir string, base int64, suffix string) string { return segmentFileName(dir, base, suffix) }

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

func crc32Castagnoli(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// mustNoError returns a check that fails t on a non-nil error.
func mustNoError(t testing.TB) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// mkdirSynced makes dir, a child of the root, on m and syncs the root,
// so that dir survives a crash.
func mkdirSynced(t testing.TB, m *MemFS, dir string) {
	t.Helper()
	if err := m.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
}

// failSyncs is a MemFS injector that fails every fsync.
func failSyncs(op MemOp, _ string) error {
	if op == MemOpSync {
		return ErrInjected
	}
	return nil
}
