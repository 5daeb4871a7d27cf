package chaos

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Replica is one broker's copy of one partition, read from its files after
// the broker stopped.
type Replica struct {
	Broker int32
	Values map[int64]string // offset -> value
	// Stamps are the producer id, producer epoch and sequence of each
	// offset's record (producer id -1 for a write without one).
	Stamps map[int64]Stamp
	LEO    int64      // one past the last offset read
	HW     int64      // from replication-offset-checkpoint, -1 if absent
	Epochs [][2]int64 // leader-epoch-checkpoint (epoch, start offset)
	Err    string
}

// ReadReplica reads <dataDir>/<topic>-<p>: its segment files, the HW from
// the data dir's replication-offset-checkpoint and its
// leader-epoch-checkpoint.
func ReadReplica(broker int32, dataDir, topic string, p int32) Replica {
	r := Replica{Broker: broker, Values: map[int64]string{}, Stamps: map[int64]Stamp{}, HW: -1}
	dir := filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, p))
	if err := readSegments(dir, r.Values, r.Stamps, &r.LEO); err != nil {
		r.Err = err.Error()
	}
	if hw, ok := readCheckpoint(filepath.Join(dataDir, "replication-offset-checkpoint"))[fmt.Sprintf("%s %d", topic, p)]; ok {
		r.HW = hw
	}
	r.Epochs = readEpochs(filepath.Join(dir, "leader-epoch-checkpoint"))
	return r
}

// readCheckpoint reads Kafka's offset checkpoint: version, count, then
// "topic partition offset" lines.
func readCheckpoint(path string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		if i < 2 {
			continue
		}
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			continue
		}
		if n, err := strconv.ParseInt(fs[2], 10, 64); err == nil {
			out[fs[0]+" "+fs[1]] = n
		}
	}
	return out
}

func readEpochs(path string) [][2]int64 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][2]int64
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		if i < 2 {
			continue
		}
		fs := strings.Fields(sc.Text())
		if len(fs) != 2 {
			continue
		}
		e, err1 := strconv.ParseInt(fs[0], 10, 64)
		o, err2 := strconv.ParseInt(fs[1], 10, 64)
		if err1 == nil && err2 == nil {
			out = append(out, [2]int64{e, o})
		}
	}
	return out
}

// Stamp is the idempotence identity a record was written under: its
// batch's producer id and epoch and the record's own sequence.
type Stamp struct {
	ProducerID    int64
	ProducerEpoch int16
	Seq           int32
}

// readSegments reads every record of the segment files in dir in offset
// order, with its Stamp into stamps; a torn batch at the end of a segment
// ends that segment.
func readSegments(dir string, into map[int64]string, stamps map[int64]Stamp, leo *int64) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no segment files in %s", dir)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for len(data) >= 12 {
			n := 12 + int(int32(binary.BigEndian.Uint32(data[8:12])))
			if n < 61 || n > len(data) {
				break
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(data[:n]); err != nil {
				return fmt.Errorf("%s: batch at %d: %w", f, b.FirstOffset, err)
			}
			data = data[n:]
			*leo = max(*leo, b.FirstOffset+int64(b.LastOffsetDelta)+1)
			if b.Attributes&0x07 != 0 {
				return fmt.Errorf("%s: batch at %d is compressed", f, b.FirstOffset)
			}
			if b.Attributes&0x20 != 0 {
				continue
			}
			recs := b.Records
			for i := int32(0); i < b.NumRecords; i++ {
				l, k := binary.Varint(recs)
				if k <= 0 || int(l)+k > len(recs) {
					return fmt.Errorf("%s: batch at %d: bad record %d", f, b.FirstOffset, i)
				}
				var kr kmsg.Record
				if err := kr.ReadFrom(recs[:k+int(l)]); err != nil {
					return fmt.Errorf("%s: batch at %d record %d: %w", f, b.FirstOffset, i, err)
				}
				recs = recs[k+int(l):]
				off := b.FirstOffset + int64(kr.OffsetDelta)
				into[off] = string(kr.Value)
				seq := int32(-1)
				if b.FirstSequence >= 0 {
					seq = b.FirstSequence + kr.OffsetDelta
				}
				stamps[off] = Stamp{ProducerID: b.ProducerID, ProducerEpoch: b.ProducerEpoch, Seq: seq}
			}
		}
	}
	return nil
}
