package chaos

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kafkazk/broker/internal/recordcodec"
)

// TestReadReplicaStamps: the final read keeps each record's producer id,
// producer epoch and own sequence (the batch's base sequence plus its
// offset delta), and -1s for a record written without a producer id, so
// the checker can tell a re-sent copy under a bumped epoch from a copy the
// broker failed to deduplicate.
func TestReadReplicaStamps(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "t-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	idem := recordcodec.NewBatch(1000, recordcodec.Values([]byte("a"), []byte("b"))...)
	idem.ProducerID, idem.ProducerEpoch, idem.BaseSequence = 7, 2, 10
	plain := recordcodec.NewBatch(1000, recordcodec.Values([]byte("c"))...)
	plain.BaseOffset = 2
	seg := append(recordcodec.MustBatch(idem), recordcodec.MustBatch(plain)...)
	if err := os.WriteFile(filepath.Join(dir, "t-0", "00000000000000000000.log"), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	r := ReadReplica(1, dir, "t", 0)
	if r.Err != "" {
		t.Fatal(r.Err)
	}
	want := map[int64]Stamp{0: {7, 2, 10}, 1: {7, 2, 11}, 2: {-1, -1, -1}}
	for o, w := range want {
		if got := r.Stamps[o]; got != w {
			t.Errorf("stamp at %d = %+v, want %+v", o, got, w)
		}
	}
	if r.Values[1] != "b" || r.Values[2] != "c" || r.LEO != 3 {
		t.Errorf("values %v LEO %d", r.Values, r.LEO)
	}
}
