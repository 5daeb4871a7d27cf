package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/kafkazk/broker/logstore"
)

// Producer state snapshots, named like Kafka's: <20-digit offset>.snapshot
// in the partition directory. A snapshot at offset O holds the idempotent
// producers' state after every batch below O, so opening a replica reads
// only the batches from O on instead of the whole log.
//
// Format (big endian): version int16 (1), crc32c uint32 of everything
// after it, count int32, then per producer: producer id int64, epoch int16,
// batch count int8, and per remembered batch (oldest first): first and last
// sequence int32, first and last offset int64. Unlike Kafka's, which keeps
// only the last batch, it keeps all five, so a retry of any of them is
// still answered with its original offsets after a restart.

const (
	snapshotSuffix  = ".snapshot"
	snapshotVersion = 1
	snapshotsKept   = 2
)

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// errBadSnapshot marks a snapshot that cannot be used; the caller falls
// back to reading the log.
var errBadSnapshot = errors.New("partition: bad producer state snapshot")

func snapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, snapshotSuffix))
}

// snapshotOffsets lists the offsets of the snapshot files in dir, ascending.
func snapshotOffsets(dir string) []int64 {
	entries, _ := os.ReadDir(dir)
	var out []int64
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, snapshotSuffix) {
			continue
		}
		if off, err := strconv.ParseInt(strings.TrimSuffix(name, snapshotSuffix), 10, 64); err == nil {
			out = append(out, off)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func encodeSnapshot(producers map[int64]*producerState) []byte {
	ids := make([]int64, 0, len(producers))
	for id := range producers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b := binary.BigEndian.AppendUint16(nil, snapshotVersion)
	b = append(b, 0, 0, 0, 0) // crc, filled below
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		s := producers[id]
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(s.epoch))
		b = append(b, byte(len(s.batches)))
		for _, pb := range s.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(pb.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(pb.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.lastOffset))
		}
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoliTable))
	return b
}

func decodeSnapshot(b []byte) (map[int64]*producerState, error) {
	if len(b) < 10 || binary.BigEndian.Uint16(b) != snapshotVersion {
		return nil, fmt.Errorf("%w: header", errBadSnapshot)
	}
	if crc32.Checksum(b[6:], castagnoliTable) != binary.BigEndian.Uint32(b[2:]) {
		return nil, fmt.Errorf("%w: crc", errBadSnapshot)
	}
	n := int(binary.BigEndian.Uint32(b[6:]))
	b = b[10:]
	out := make(map[int64]*producerState, min(n, 1<<16))
	for i := 0; i < n; i++ {
		if len(b) < 11 {
			return nil, fmt.Errorf("%w: producer %d truncated", errBadSnapshot, i)
		}
		id := int64(binary.BigEndian.Uint64(b))
		s := &producerState{epoch: int16(binary.BigEndian.Uint16(b[8:]))}
		k := int(b[10])
		b = b[11:]
		if k > producerBatchesKept || len(b) < k*24 {
			return nil, fmt.Errorf("%w: producer %d batches", errBadSnapshot, id)
		}
		for j := 0; j < k; j++ {
			s.batches = append(s.batches, producerBatch{
				firstSeq: int32(binary.BigEndian.Uint32(b)), lastSeq: int32(binary.BigEndian.Uint32(b[4:])),
				firstOffset: int64(binary.BigEndian.Uint64(b[8:])), lastOffset: int64(binary.BigEndian.Uint64(b[16:])),
			})
			b = b[24:]
		}
		out[id] = s
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errBadSnapshot, len(b))
	}
	return out, nil
}

// writeProducerSnapshotLocked records the producer state at the LEO
// (written with logstore.WriteFileAtomic: a temporary file, fsync, rename,
// fsync of the directory) and keeps the newest snapshotsKept snapshots.
// Caller holds r.mu, so no append moves the LEO.
func (r *Replica) writeProducerSnapshotLocked() error {
	leo := r.log.LogEndOffset()
	path := snapshotPath(r.dir, leo)
	if _, err := os.Stat(path); err == nil {
		return nil // nothing appended since the last snapshot
	}
	if err := logstore.WriteFileAtomic(path, encodeSnapshot(r.producers)); err != nil {
		return fmt.Errorf("write producer snapshot %s: %w", path, err)
	}
	offs := snapshotOffsets(r.dir)
	for i := 0; i+snapshotsKept < len(offs); i++ {
		_ = os.Remove(snapshotPath(r.dir, offs[i]))
	}
	return nil
}

// loadProducerSnapshot restores the producer state from the newest usable
// snapshot at or below the LEO and returns the offset to read the log from;
// snapshots above the LEO (written before a truncation) are deleted. With
// no usable snapshot it returns the log start offset and an empty state.
func (r *Replica) loadProducerSnapshot() int64 {
	leo, start := r.log.LogEndOffset(), r.log.LogStartOffset()
	offs := snapshotOffsets(r.dir)
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		if off > leo {
			_ = os.Remove(snapshotPath(r.dir, off))
			continue
		}
		if off < start {
			break
		}
		data, err := os.ReadFile(snapshotPath(r.dir, off))
		if err == nil {
			var producers map[int64]*producerState
			if producers, err = decodeSnapshot(data); err == nil {
				r.producers = producers
				return off
			}
		}
		r.logger.Warn().Err(err).Int64("offset", off).Msg("ignoring producer state snapshot; reading the log instead")
	}
	r.producers = map[int64]*producerState{}
	return start
}

// dropSnapshotsAbove deletes the producer snapshots above offset: after a
// truncation they describe batches that are gone, and a later snapshot at
// the same offset would otherwise be skipped or a crash would load them.
func (r *Replica) dropSnapshotsAbove(offset int64) {
	for _, off := range snapshotOffsets(r.dir) {
		if off > offset {
			_ = os.Remove(snapshotPath(r.dir, off))
		}
	}
}
