package logstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
)

// BenchmarkAppend measures leader appends of one batch per call, by batch
// size (records of 100-byte values) and fsync policy. Old segments are
// deleted as the log grows so that long runs stay within the disk.
func BenchmarkAppend(b *testing.B) {
	for _, records := range []int{1, 100} {
		for _, policy := range []struct {
			name          string
			flushMessages int64
		}{{"fsync=never", math.MaxInt64}, {"fsync=each", 1}} {
			b.Run(fmt.Sprintf("records=%d/%s", records, policy.name), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.Log = zerolog.Nop()
				cfg.SegmentBytes = 64 << 20
				cfg.RetentionBytes = 128 << 20
				cfg.FlushMessages = policy.flushMessages
				l, err := Open(b.TempDir(), cfg, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				batch := makeBatch(batchSpec{records: records, valueSize: 100, firstTs: 1})
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				segments := 1
				for b.Loop() {
					// The append rewrote the base offset; a client sends 0.
					binary.BigEndian.PutUint64(batch, 0)
					if _, err := l.AppendAsLeader(batch, 1, -1); err != nil {
						b.Fatal(err)
					}
					if n := len(l.segments); n != segments {
						segments = n
						if _, err := l.DeleteOldSegments(math.MaxInt64); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkRead measures reads at random offsets of a 10,000-batch log
// (10 records of 100 bytes each), for one batch and for 64 KiB.
func BenchmarkRead(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Log = zerolog.Nop()
	cfg.SegmentBytes = 4 << 20
	l, err := Open(b.TempDir(), cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for range 10_000 {
		if _, err := l.AppendAsLeader(makeBatch(batchSpec{records: 10, valueSize: 100, firstTs: 1}), 1, -1); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	for _, maxBytes := range []int32{1, 64 << 10} {
		b.Run(fmt.Sprintf("maxBytes=%d", maxBytes), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			var n int64
			for b.Loop() {
				out, err := l.Read(rng.Int64N(leo), maxBytes, leo)
				if err != nil {
					b.Fatal(err)
				}
				n += int64(len(out))
			}
			b.SetBytes(n / int64(b.N))
		})
	}
}

// BenchmarkAppendRead is BenchmarkRead reusing one destination buffer, as
// a caller of AppendRead can.
func BenchmarkAppendRead(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Log = zerolog.Nop()
	cfg.SegmentBytes = 4 << 20
	l, err := Open(b.TempDir(), cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for range 10_000 {
		if _, err := l.AppendAsLeader(makeBatch(batchSpec{records: 10, valueSize: 100, firstTs: 1}), 1, -1); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	for _, maxBytes := range []int32{1, 64 << 10} {
		b.Run(fmt.Sprintf("maxBytes=%d", maxBytes), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			var n int64
			var buf []byte
			for b.Loop() {
				out, err := l.AppendRead(buf[:0], rng.Int64N(leo), maxBytes, leo)
				if err != nil {
					b.Fatal(err)
				}
				n += int64(len(out))
				buf = out
			}
			b.SetBytes(n / int64(b.N))
		})
	}
}

// BenchmarkFileCacheHit measures an append and a one-batch read of a log
// whose .log goes through a FileCache that holds it: the handle's pin
// must allocate nothing (the read allocates only what AppendRead would
// without a cache: nothing, the buffer being reused).
func BenchmarkFileCacheHit(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Log = zerolog.Nop()
	cfg.SegmentBytes = 64 << 20
	cfg.Files = NewFileCache(8)
	l, err := Open(b.TempDir(), cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := makeBatch(batchSpec{records: 1, valueSize: 100, firstTs: 1})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			binary.BigEndian.PutUint64(batch, 0)
			if _, err := l.AppendAsLeader(batch, 1, -1); err != nil {
				b.Fatal(err)
			}
		}
	})
	leo := l.LogEndOffset()
	b.Run("read", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 2))
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			out, err := l.AppendRead(buf[:0], rng.Int64N(leo), 1, leo)
			if err != nil {
				b.Fatal(err)
			}
			buf = out
		}
	})
}

// BenchmarkAppendReadManyLogs is a fetch response built as a Fetch builds
// it: one read per partition, each appended to the same buffer, over 1,000
// logs of a few small batches each.
func BenchmarkAppendReadManyLogs(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Log = zerolog.Nop()
	dir := b.TempDir()
	logs := make([]*Log, 1000)
	for i := range logs {
		l, err := Open(filepath.Join(dir, fmt.Sprintf("t-%d", i)), cfg, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		for range 2 {
			if _, err := l.AppendAsLeader(makeBatch(batchSpec{records: 1, valueSize: 1024, firstTs: 1}), 1, -1); err != nil {
				b.Fatal(err)
			}
		}
		logs[i] = l
	}
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		var buf []byte
		for _, l := range logs {
			out, err := l.AppendRead(buf, 0, 1<<20, l.LogEndOffset())
			if err != nil {
				b.Fatal(err)
			}
			buf = out
		}
		n += int64(len(buf))
	}
	b.SetBytes(n / int64(b.N))
}
