package logstore

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestOffsetCheckpointRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []CheckpointEntry
	}{
		{"empty", nil},
		{"one", []CheckpointEntry{{"orders", 0, 42}}},
		{"many", []CheckpointEntry{{"orders", 0, 42}, {"orders", 1, 0}, {"__consumer_offsets", 49, 1 << 40}, {"a.b-c_d", 3, -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), ReplicationCheckpointFile)
			must(t, WriteOffsetCheckpoint(path, tt.entries))
			got, err := ReadOffsetCheckpoint(path)
			must(t, err)
			if len(got) != len(tt.entries) || (len(got) > 0 && !reflect.DeepEqual(got, tt.entries)) {
				t.Fatalf("read back %v, want %v", got, tt.entries)
			}
		})
	}
}

func TestOffsetCheckpointFormat(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), RecoveryPointCheckpointFile)
	must(t, WriteOffsetCheckpoint(path, []CheckpointEntry{{"t", 0, 5}, {"t", 1, 7}}))
	data, err := os.ReadFile(path)
	must(t, err)
	if want := "0\n2\nt 0 5\nt 1 7\n"; string(data) != want {
		t.Fatalf("file %q, want %q", data, want)
	}
	if err := WriteOffsetCheckpoint(path, []CheckpointEntry{{"has space", 0, 1}}); err == nil {
		t.Fatal("wrote a topic name with a space")
	}
}

func TestReadOffsetCheckpointErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
	}{
		{"bad version", "1\n0\n"},
		{"count too high", "0\n2\nt 0 5\n"},
		{"count too low", "0\n0\nt 0 5\n"},
		{"missing field", "0\n1\nt 5\n"},
		{"bad offset", "0\n1\nt 0 x\n"},
		{"empty file", ""},
		{"torn", "0\n2\nt 0 5\nt 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "cp")
			must(t, os.WriteFile(path, []byte(tt.content), 0o644))
			_, err := ReadOffsetCheckpoint(path)
			wantErr(t, err, ErrCorrupt)
		})
	}
	got, err := ReadOffsetCheckpoint(filepath.Join(t.TempDir(), "missing"))
	if err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v, %v", got, err)
	}
}

// TestCheckpointTornTmpDoesNotReplace: a crash while writing leaves a torn
// .tmp beside the old file; the old file is still what is read, and the
// next write replaces both.
func TestCheckpointTornTmpDoesNotReplace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), LogStartOffsetCheckpointFile)
	old := []CheckpointEntry{{"t", 0, 100}}
	must(t, WriteOffsetCheckpoint(path, old))
	must(t, os.WriteFile(path+".tmp", []byte("0\n3\nt 0 2"), 0o644))
	got, err := ReadOffsetCheckpoint(path)
	must(t, err)
	if !reflect.DeepEqual(got, old) {
		t.Fatalf("read %v, want the old %v", got, old)
	}
	next := []CheckpointEntry{{"t", 0, 200}}
	must(t, WriteOffsetCheckpoint(path, next))
	got, err = ReadOffsetCheckpoint(path)
	must(t, err)
	if !reflect.DeepEqual(got, next) {
		t.Fatalf("read %v, want %v", got, next)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("tmp file left: %v", err)
	}
}

// TestWriteFileAtomic: the file is created, then replaced whole, and no
// temporary file is left behind, also when the write fails.
func TestWriteFileAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	for _, data := range []string{"first version", "second"} {
		must(t, WriteFileAtomic(path, []byte(data)))
		got, err := os.ReadFile(path)
		must(t, err)
		if string(got) != data {
			t.Fatalf("file holds %q, want %q", got, data)
		}
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "state"), []byte("x")); err == nil {
		t.Fatal("wrote into a missing directory")
	}
	entries, err := os.ReadDir(dir)
	must(t, err)
	if len(entries) != 1 || entries[0].Name() != "state" {
		t.Fatalf("directory holds %v, want only state", entries)
	}
}
