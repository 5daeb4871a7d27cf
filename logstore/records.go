package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The records inside a v2 batch (after the 61-byte header, inflated if the
// batch is compressed) follow one another, each as
//
//	length varint (bytes after this field)
//	attributes int8 (unused)
//	timestampDelta varlong (from the batch's firstTimestamp)
//	offsetDelta varint (from the batch's baseOffset)
//	keyLength varint (-1: null key), key
//	valueLength varint (-1: null value, a tombstone), value
//	headerCount varint, then per header: keyLength varint, key,
//	valueLength varint (-1: null), value
//
// with zigzag varints. Only the log cleaner walks them: appends and reads
// work per batch.

// errRecordFraming is wrapped by the errors of a record walk.
var errRecordFraming = errors.New("record framing")

// record is one record of a records section, as recordIter found it. Key
// aliases the section.
type record struct {
	start, end     int // byte range of the whole record, its length varint included
	timestampDelta int64
	offsetDelta    int32
	key            []byte // nil when the key is null
	hasKey         bool
	hasValue       bool   // false for a tombstone (null value)
	value          []byte // aliases the section; nil when the value is null
}

// recordIter walks the records of an inflated records section without
// allocating. The headers are skipped, not parsed: the record's byte range
// covers them, so copying the range keeps them.
type recordIter struct {
	buf []byte
	pos int
	rec record
	err error
}

func newRecordIter(section []byte) recordIter { return recordIter{buf: section} }

// next advances to the next record; false at the end or at a framing
// error (err).
func (it *recordIter) next() bool {
	if it.err != nil || it.pos >= len(it.buf) {
		return false
	}
	start := it.pos
	length, n := binary.Varint(it.buf[start:])
	if n <= 0 || length < 1 || length > int64(len(it.buf)-start-n) {
		it.err = fmt.Errorf("%w: record at byte %d has length %d with %d bytes left", errRecordFraming, start, length, len(it.buf)-start)
		return false
	}
	body := it.buf[start+n : start+n+int(length)]
	end := start + n + int(length)
	p := 1 // attributes
	var v int64
	fail := func(what string) bool {
		it.err = fmt.Errorf("%w: record at byte %d: bad %s", errRecordFraming, start, what)
		return false
	}
	rd := func() bool {
		if p >= len(body) {
			return false
		}
		var k int
		v, k = binary.Varint(body[p:])
		if k <= 0 {
			return false
		}
		p += k
		return true
	}
	r := record{start: start, end: end}
	if !rd() {
		return fail("timestamp delta")
	}
	r.timestampDelta = v
	if !rd() || v < 0 || v > 1<<31-1 {
		return fail("offset delta")
	}
	r.offsetDelta = int32(v)
	if !rd() || v < -1 || v > int64(len(body)-p) {
		return fail("key length")
	}
	if v >= 0 {
		r.hasKey, r.key = true, body[p:p+int(v)]
		p += int(v)
	}
	if !rd() || v < -1 || v > int64(len(body)-p) {
		return fail("value length")
	}
	if v >= 0 {
		r.hasValue, r.value = true, body[p:p+int(v)]
		p += int(v)
	}
	// The header count must be there; the headers themselves are carried
	// as bytes.
	if !rd() || v < 0 {
		return fail("header count")
	}
	it.rec = r
	it.pos = end
	return true
}
