package logstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Names of the per-log-directory checkpoint files, as in Kafka.
const (
	RecoveryPointCheckpointFile  = "recovery-point-offset-checkpoint"
	ReplicationCheckpointFile    = "replication-offset-checkpoint"
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	// LeaderEpochCheckpointFile lives in each partition directory.
	LeaderEpochCheckpointFile = "leader-epoch-checkpoint"
)

// checkpointVersion is the only format version Kafka writes (line 1).
const checkpointVersion = "0"

// CheckpointEntry is one line of an offset checkpoint file.
type CheckpointEntry struct {
	Topic     string
	Partition int32
	Offset    int64
}

// ReadOffsetCheckpoint reads an offset checkpoint file in Kafka's text format:
// "0\n<count>\n" then "<topic> <partition> <offset>\n" per entry. A missing
// file is an empty checkpoint. A file that does not parse, or whose count
// does not match its lines, returns an error wrapping ErrCorrupt.
func ReadOffsetCheckpoint(path string) ([]CheckpointEntry, error) {
	return ReadOffsetCheckpointFS(OSFS, path)
}

// ReadOffsetCheckpointFS is ReadOffsetCheckpoint on fsys.
func ReadOffsetCheckpointFS(fsys FS, path string) ([]CheckpointEntry, error) {
	lines, err := readCheckpointLines(fsys, path)
	if err != nil || len(lines) == 0 {
		return nil, err
	}
	entries := make([]CheckpointEntry, 0, len(lines))
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("read checkpoint %s: entry %d %q: %w", path, i, line, ErrCorrupt)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("read checkpoint %s: entry %d %q: %w", path, i, line, ErrCorrupt)
		}
		entries = append(entries, CheckpointEntry{Topic: f[0], Partition: int32(p), Offset: off})
	}
	return entries, nil
}

// WriteOffsetCheckpoint replaces the checkpoint file at path atomically: it
// writes path+".tmp", fsyncs it, renames it over path and fsyncs the
// directory, so a crash leaves either the old file or the new one.
func WriteOffsetCheckpoint(path string, entries []CheckpointEntry) error {
	return WriteOffsetCheckpointFS(OSFS, path, entries)
}

// WriteOffsetCheckpointFS is WriteOffsetCheckpoint on fsys.
func WriteOffsetCheckpointFS(fsys FS, path string, entries []CheckpointEntry) error {
	for _, e := range entries {
		if e.Topic == "" || strings.ContainsAny(e.Topic, " \t\r\n") {
			return fmt.Errorf("write checkpoint %s: topic %q cannot be stored", path, e.Topic)
		}
	}
	err := writeCheckpointLines(fsys, path, len(entries), func(b []byte, i int) []byte {
		b = append(b, entries[i].Topic...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(entries[i].Partition), 10)
		b = append(b, ' ')
		return strconv.AppendInt(b, entries[i].Offset, 10)
	})
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	return nil
}

// readCheckpointLines returns the entry lines of a versioned, counted
// checkpoint file; nil for a missing file.
func readCheckpointLines(fsys FS, path string) ([]string, error) {
	data, err := readFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	lines := strings.Split(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != checkpointVersion {
		return nil, fmt.Errorf("read checkpoint %s: bad header: %w", path, ErrCorrupt)
	}
	count, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || count < 0 || count != len(lines)-2 {
		return nil, fmt.Errorf("read checkpoint %s: count %q for %d entries: %w", path, lines[1], len(lines)-2, ErrCorrupt)
	}
	return lines[2:], nil
}

// writeCheckpointLines is the inverse of readCheckpointLines: it replaces
// the file at path (WriteFileAtomic) with the version line, the count line
// and count entry lines, entry i being what appendEntry appends to b.
func writeCheckpointLines(fsys FS, path string, count int, appendEntry func(b []byte, i int) []byte) error {
	return writeCheckpointLinesSync(fsys, path, count, appendEntry, true)
}

// writeCheckpointLinesSync is writeCheckpointLines that leaves the fsync
// of the directory after the rename to the caller when dirSync is false.
func writeCheckpointLinesSync(fsys FS, path string, count int, appendEntry func(b []byte, i int) []byte, dirSync bool) error {
	b := append([]byte(checkpointVersion), '\n')
	b = strconv.AppendInt(b, int64(count), 10)
	b = append(b, '\n')
	for i := range count {
		b = append(appendEntry(b, i), '\n')
	}
	return writeFileAtomic(fsys, path, b, dirSync)
}

// WriteFileAtomic replaces the file at path with data so that a crash
// leaves either the old file or the new one, whole: it writes path+".tmp"
// (mode 0644), fsyncs it, renames it over path and fsyncs the directory so
// that the rename itself is durable. If writing or syncing the temporary
// file fails, it is removed; Open removes the .tmp files that a crash left
// in a partition directory. Calls for the same path must not overlap.
func WriteFileAtomic(path string, data []byte) error {
	return WriteFileAtomicFS(OSFS, path, data)
}

// WriteFileAtomicFS is WriteFileAtomic on fsys. An error from an fsync is
// returned as it is: the caller must not take the file as written.
func WriteFileAtomicFS(fsys FS, path string, data []byte) error {
	return writeFileAtomic(fsys, path, data, true)
}

// WriteFileUnsynced replaces the file at path with data as
// WriteFileAtomic does, but fsyncs neither the file nor the directory: the
// caller syncs the file system afterwards (FileSystemSyncer), before
// anything relies on the file. A crash before that sync may leave the old
// file, the new one, or the new one empty or torn, so it suits only files
// whose reader checks them (a producer snapshot's CRC).
func WriteFileUnsynced(fsys FS, path string, data []byte) error {
	return writeFile(fsys, path, data, false, false)
}

// writeFileAtomic is WriteFileAtomicFS, leaving the fsync of the
// directory after the rename to the caller when dirSync is false.
func writeFileAtomic(fsys FS, path string, data []byte, dirSync bool) error {
	return writeFile(fsys, path, data, true, dirSync)
}

// writeFile writes path+".tmp", fsyncs it with fileSync, renames it over
// path and fsyncs the directory with dirSync.
func writeFile(fsys FS, path string, data []byte, fileSync, dirSync bool) error {
	tmp := path + ".tmp"
	f, err := openFile(fsys, nil, tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && fileSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	if !dirSync {
		return nil
	}
	return syncDir(fsys, filepath.Dir(path))
}

// syncDir fsyncs a directory so that file creations, renames and removals
// in it survive a crash.
func syncDir(fsys FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
