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
// Format (big endian): version int16 (2), crc32c uint32 of everything
// after it, count int32, then per producer: producer id int64, epoch int16,
// coordinator epoch int32 (-1: none seen), last timestamp int64 (-1),
// ongoing transaction first offset int64 (-1: none), last marker offset
// int64 (-1: none), batch count int8, and per remembered batch (oldest
// first): first and last sequence int32, first and last offset int64;
// then the completed transactions whose marker the HW had not passed
// (count int32; per transaction producer id, first offset and marker
// offset, int64 each). Version 1 (still read) has neither the four
// per-producer transaction fields nor the completed transactions. Unlike
// Kafka's, which keeps only the last batch, it keeps all five, so a retry
// of any of them is still answered with its original offsets after a
// restart.

const (
	snapshotSuffix  = ".snapshot"
	snapshotVersion = 2
	// snapshotVersion1 is the format before transactions, still read.
	snapshotVersion1 = 1
	snapshotsKept    = 2
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

func encodeSnapshot(producers map[int64]*producerState, unreplicated []txnMeta) []byte {
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
		b = binary.BigEndian.AppendUint32(b, uint32(s.coordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(s.lastTimestamp))
		b = binary.BigEndian.AppendUint64(b, uint64(s.txnFirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(s.lastMarkerOffset))
		b = append(b, byte(len(s.batches)))
		for _, pb := range s.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(pb.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(pb.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.lastOffset))
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(unreplicated)))
	for _, t := range unreplicated {
		b = binary.BigEndian.AppendUint64(b, uint64(t.producerID))
		b = binary.BigEndian.AppendUint64(b, uint64(t.firstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(t.lastOffset))
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoliTable))
	return b
}

// decodeSnapshot reads a version 2 or version 1 snapshot.
func decodeSnapshot(b []byte) (map[int64]*producerState, []txnMeta, error) {
	if len(b) < 10 {
		return nil, nil, fmt.Errorf("%w: header", errBadSnapshot)
	}
	version := binary.BigEndian.Uint16(b)
	if version != snapshotVersion && version != snapshotVersion1 {
		return nil, nil, fmt.Errorf("%w: version %d", errBadSnapshot, version)
	}
	if crc32.Checksum(b[6:], castagnoliTable) != binary.BigEndian.Uint32(b[2:]) {
		return nil, nil, fmt.Errorf("%w: crc", errBadSnapshot)
	}
	n := int(binary.BigEndian.Uint32(b[6:]))
	b = b[10:]
	fixed := 11 // id, epoch, batch count
	if version == snapshotVersion {
		fixed += 28 // coordinator epoch, last timestamp, txn first offset, last marker offset
	}
	out := make(map[int64]*producerState, min(n, 1<<16))
	for i := 0; i < n; i++ {
		if len(b) < fixed {
			return nil, nil, fmt.Errorf("%w: producer %d truncated", errBadSnapshot, i)
		}
		id := int64(binary.BigEndian.Uint64(b))
		s := newProducerState(int16(binary.BigEndian.Uint16(b[8:])))
		b = b[10:]
		if version == snapshotVersion {
			s.coordinatorEpoch = int32(binary.BigEndian.Uint32(b))
			s.lastTimestamp = int64(binary.BigEndian.Uint64(b[4:]))
			s.txnFirstOffset = int64(binary.BigEndian.Uint64(b[12:]))
			s.lastMarkerOffset = int64(binary.BigEndian.Uint64(b[20:]))
			b = b[28:]
		}
		k := int(b[0])
		b = b[1:]
		if k > producerBatchesKept || len(b) < k*24 {
			return nil, nil, fmt.Errorf("%w: producer %d batches", errBadSnapshot, id)
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
	var unreplicated []txnMeta
	if version == snapshotVersion {
		if len(b) < 4 {
			return nil, nil, fmt.Errorf("%w: completed transactions truncated", errBadSnapshot)
		}
		k := int(binary.BigEndian.Uint32(b))
		b = b[4:]
		if k < 0 || len(b) < k*24 {
			return nil, nil, fmt.Errorf("%w: %d completed transactions truncated", errBadSnapshot, k)
		}
		for j := 0; j < k; j++ {
			unreplicated = insertTxn(unreplicated, txnMeta{producerID: int64(binary.BigEndian.Uint64(b)),
				firstOffset: int64(binary.BigEndian.Uint64(b[8:])), lastOffset: int64(binary.BigEndian.Uint64(b[16:]))})
			b = b[24:]
		}
	}
	if len(b) != 0 {
		return nil, nil, fmt.Errorf("%w: %d trailing bytes", errBadSnapshot, len(b))
	}
	return out, unreplicated, nil
}

// writeProducerSnapshotLocked records the producer state at the LEO
// (written with logstore.WriteFileAtomic: a temporary file, fsync, rename,
// fsync of the directory) and keeps the newest snapshotsKept snapshots,
// the newest at or below the last checkpointed recovery point (an open
// after an unclean shutdown starts from that one, see openReplica) and
// the newest at or below the log's recovery point (the next checkpoint's).
// Caller holds r.mu, so no append moves the LEO.
func (r *Replica) writeProducerSnapshotLocked() error {
	return r.writeProducerSnapshotWith(logstore.WriteFileAtomic)
}

// writeProducerSnapshotWith is writeProducerSnapshotLocked, writing the
// file with write: the shutdown's unsynced close writes it without an
// fsync (logstore.WriteFileUnsynced), before its sync of the file system.
// Caller holds r.mu.
func (r *Replica) writeProducerSnapshotWith(write func(path string, data []byte) error) error {
	if err := r.storageErr; err != nil {
		// The state may not match the log (a marker whose aborted-index
		// entry could not be written): a snapshot of it would outlive
		// the restart that puts it right.
		return fmt.Errorf("no producer snapshot of %s after a storage failure: %w", r.tp, err)
	}
	leo := r.log.LogEndOffset()
	if leo == r.log.LogStartOffset() && len(r.producers) == 0 && len(r.unreplicatedTxns) == 0 && len(r.ongoingTxns) == 0 {
		// An empty log with no producer state: an open reads nothing
		// and starts from this same empty state, so a snapshot would
		// only cost an fsync of the file and of the partition directory
		// per partition at every recovery checkpoint and close (Kafka
		// takes none either until an offset is past the last one).
		return nil
	}
	path := snapshotPath(r.dir, leo)
	if _, err := os.Stat(path); err == nil {
		return nil // nothing appended since the last snapshot
	}
	r.pruneUnreplicatedLocked()
	if err := write(path, encodeSnapshot(r.producers, r.unreplicatedTxns)); err != nil {
		return fmt.Errorf("write producer snapshot %s: %w", path, err)
	}
	offs := snapshotOffsets(r.dir)
	// The newest at or below the last checkpointed recovery point (an
	// open after a crash now starts there) and the newest at or below the
	// log's own (the next checkpoint writes it).
	checkpointed, rp := r.checkpointedRP.Load(), r.log.RecoveryPoint()
	keepCheckpointed, keepRP := int64(-1), int64(-1)
	for _, off := range offs {
		if off <= checkpointed {
			keepCheckpointed = off
		}
		if off <= rp {
			keepRP = off
		}
	}
	for i := 0; i+snapshotsKept < len(offs); i++ {
		if offs[i] != keepCheckpointed && offs[i] != keepRP {
			_ = os.Remove(snapshotPath(r.dir, offs[i]))
		}
	}
	return nil
}

// loadProducerSnapshot restores the producer and transaction state from
// the newest usable snapshot at or below upTo (and the LEO) and returns the
// offset to read the log from; snapshots above the LEO (written before a
// truncation) are deleted. With no usable snapshot it returns the log
// start offset and an empty state.
func (r *Replica) loadProducerSnapshot(upTo int64) int64 {
	leo, start := r.log.LogEndOffset(), r.log.LogStartOffset()
	offs := snapshotOffsets(r.dir)
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		if off > leo {
			_ = os.Remove(snapshotPath(r.dir, off))
			continue
		}
		if off > upTo {
			continue
		}
		if off < start {
			break
		}
		data, err := os.ReadFile(snapshotPath(r.dir, off))
		if err == nil {
			var producers map[int64]*producerState
			var unreplicated []txnMeta
			if producers, unreplicated, err = decodeSnapshot(data); err == nil {
				r.producers, r.unreplicatedTxns = producers, unreplicated
				r.rebuildOngoingLocked()
				return off
			}
		}
		r.logger.Warn().Err(err).Int64("offset", off).Msg("ignoring producer state snapshot; reading the log instead")
		if errors.Is(err, errBadSnapshot) {
			// Torn (a crash before the shutdown's sync of the file
			// system): removed, or it would stand in for the next
			// snapshot at its offset.
			_ = os.Remove(snapshotPath(r.dir, off))
		}
	}
	r.resetProducerStateLocked()
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
