package partition

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kafkazk/broker/internal/recordcodec"
	"github.com/kafkazk/broker/logstore"
)

// storedInflateMax bounds how far a stored compressed batch may inflate
// while a timestamp search walks its records. Stored batches passed the
// produce path's bound when they were written; this one only stops a walk
// of damaged data, so it is generous enough for any max.message.bytes
// they were written under.
const storedInflateMax = 1 << 30

// errFound stops a batch walk once the record is found.
var errFound = errors.New("found")

// offsetForTimestamp is Kafka's fetchOffsetByTimestamp for a timestamp
// target: from the first batch whose max timestamp reaches ts (logstore's
// time index finds it), the first record at or above the log start whose
// own timestamp reaches ts, and that timestamp, as
// FileRecords.searchForTimestamp walks the batches and their records.
// Records are read, and compressed ones inflated, only from that batch on
// until one qualifies. The Log allows concurrent readers: the caller need
// not hold r.mu (and should not, so appends go on meanwhile); a log start
// that moves past the walk meanwhile moves the walk with it.
func (r *Replica) offsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	off, _, ok, err := r.log.OffsetForTimestamp(ts)
	if err != nil || !ok {
		return -1, -1, false, err
	}
	if r.timestampWalkHook != nil {
		r.timestampWalkHook()
	}
	start := max(off, r.log.LogStartOffset())
	end := r.log.LogEndOffset()
	for off < end {
		data, err := r.log.Read(off, 64<<10, end)
		if errors.Is(err, logstore.ErrOffsetOutOfRange) {
			// Retention or DeleteRecords moved the log start past off
			// meanwhile: go on from the new log start.
			if ls := r.log.LogStartOffset(); ls > off {
				off, start = ls, max(start, ls)
				continue
			}
		}
		if err != nil {
			return -1, -1, false, err
		}
		if len(data) == 0 {
			break
		}
		next := off
		err = forEachBatch(data, func(h logstore.BatchHeader, raw []byte) error {
			next = h.NextOffset()
			if h.LastOffset() < start || h.MaxTimestamp < ts {
				return nil
			}
			o, t, ok, err := firstRecordAtTimestamp(raw, h, ts, start)
			if err != nil {
				return fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
			}
			if ok {
				offset, timestamp, found = o, t, true
				return errFound
			}
			return nil
		})
		if found {
			return offset, timestamp, true, nil
		}
		if err != nil {
			return -1, -1, false, err
		}
		if next <= off {
			break
		}
		off = next
	}
	return -1, -1, false, nil
}

// firstRecordAtTimestamp walks the records of the stored batch raw (h its
// header), inflating a compressed one as a stream, and returns the offset
// and timestamp of the first record at or above minOffset whose timestamp
// is at least ts. In a LogAppendTime batch every record has the batch's
// max timestamp, as Kafka's DefaultRecordBatch reports them. A batch the
// cleaner kept empty (NumRecords 0) holds no record to find.
func firstRecordAtTimestamp(raw []byte, h logstore.BatchHeader, ts, minOffset int64) (offset, timestamp int64, found bool, err error) {
	if h.NumRecords == 0 {
		return -1, -1, false, nil
	}
	if h.TimestampType() == logstore.LogAppendTime {
		if h.MaxTimestamp < ts || h.LastOffset() < minOffset {
			return -1, -1, false, nil
		}
		return max(h.BaseOffset, minOffset), h.MaxTimestamp, true, nil
	}
	data := raw[logstore.BatchHeaderSize:]
	if h.Compression() == 0 {
		for i := int32(0); i < h.NumRecords; i++ {
			length, k := binary.Varint(data)
			if k <= 0 || length < 0 || length > int64(len(data)-k) {
				return -1, -1, false, fmt.Errorf("%w: record %d: bad length", ErrCorruptMessage, i)
			}
			tsDelta, offsetDelta, err := recordTimes(data[k : k+int(length)])
			if err != nil {
				return -1, -1, false, fmt.Errorf("%w: record %d: %v", ErrCorruptMessage, i, err)
			}
			if o, t := h.BaseOffset+offsetDelta, h.FirstTimestamp+tsDelta; t >= ts && o >= minOffset {
				return o, t, true, nil
			}
			data = data[k+int(length):]
		}
		return -1, -1, false, nil
	}
	zr, err := recordcodec.NewReader(h.Compression(), data, storedInflateMax)
	if err != nil {
		return -1, -1, false, fmt.Errorf("%w: %v", ErrCorruptMessage, err)
	}
	defer zr.Close()
	s := &recordStream{br: bufio.NewReaderSize(zr, 32<<10)}
	for i := int32(0); i < h.NumRecords; i++ {
		length, err := binary.ReadVarint(s.br)
		if err != nil || length < 0 {
			return -1, -1, false, fmt.Errorf("%w: record %d: bad length: %v", ErrCorruptMessage, i, orBad(err))
		}
		s.left = length
		tsDelta, offsetDelta, err := s.times()
		if err != nil {
			return -1, -1, false, fmt.Errorf("%w: record %d: %v", ErrCorruptMessage, i, err)
		}
		if o, t := h.BaseOffset+offsetDelta, h.FirstTimestamp+tsDelta; t >= ts && o >= minOffset {
			return o, t, true, nil
		}
		if err := s.skip(s.left); err != nil {
			return -1, -1, false, fmt.Errorf("%w: record %d: %v", ErrCorruptMessage, i, err)
		}
	}
	return -1, -1, false, nil
}

// recordTimes reads a record body's timestamp and offset deltas, which
// follow its attributes byte.
func recordTimes(body []byte) (tsDelta, offsetDelta int64, err error) {
	if len(body) < 1 {
		return 0, 0, errors.New("empty")
	}
	p := 1
	tsDelta, k := binary.Varint(body[p:])
	if k <= 0 {
		return 0, 0, errors.New("bad timestamp delta")
	}
	p += k
	offsetDelta, k = binary.Varint(body[p:])
	if k <= 0 {
		return 0, 0, errors.New("bad offset delta")
	}
	return tsDelta, offsetDelta, nil
}

// times reads the attributes, timestamp delta and offset delta of the
// record the stream is at, leaving the rest of it (s.left bytes) unread.
func (s *recordStream) times() (tsDelta, offsetDelta int64, err error) {
	if _, err := s.ReadByte(); err != nil {
		return 0, 0, err
	}
	if tsDelta, err = s.varint(); err != nil {
		return 0, 0, fmt.Errorf("bad timestamp delta: %w", err)
	}
	if offsetDelta, err = s.varint(); err != nil {
		return 0, 0, fmt.Errorf("bad offset delta: %w", err)
	}
	return tsDelta, offsetDelta, nil
}
