package logstore

import "errors"

// Errors returned by Log, the batch helpers and the checkpoint files. Callers
// test them with errors.Is; every returned error wraps at most one of them
// together with the operation and its target.
var (
	// ErrCorrupt is returned when bytes fail a CRC32C or framing check: a
	// batch handed to an append (nothing was written), a segment below
	// the recovery point found damaged when a Log is opened (damage above
	// it is a torn tail and is truncated), a batch read back
	// from a segment, or a checkpoint file that does not parse. Corruption
	// is its own class so that callers can choose between truncating and
	// refusing to start.
	ErrCorrupt = errors.New("logstore: corrupt data")
	// ErrInvalidRecord is returned by the appends for a well-framed batch
	// that breaks a rule: a magic other than 2, a record count that does
	// not match its last offset delta, and, from a client, a base offset
	// other than 0 or a control batch. Nothing was written.
	ErrInvalidRecord = errors.New("logstore: invalid record")
	// ErrOffsetOutOfRange is returned by Log.Read for an offset outside
	// [LogStartOffset, LogEndOffset].
	ErrOffsetOutOfRange = errors.New("logstore: offset out of range")
	// ErrOffsetMismatch is returned by Log.AppendAsFollower when the first
	// batch starts below LogEndOffset or a later batch does not start
	// after the one before it (a start above is a gap, which is taken).
	// Nothing was written.
	ErrOffsetMismatch = errors.New("logstore: offset mismatch")
	// ErrRecordListTooLarge is returned by the appends for a single batch
	// larger than Config.SegmentBytes, which no segment could hold. Nothing
	// was written.
	ErrRecordListTooLarge = errors.New("logstore: record list too large")
	// ErrClosed is returned by every Log method called after Close.
	ErrClosed = errors.New("logstore: log closed")
	// ErrStorage wraps the error of an fsync that failed (or of a file
	// that could not be restored after a failed write), Kafka's
	// KAFKA_STORAGE_ERROR. It is fatal for the log: what the fsync should
	// have persisted may be lost, so the log never again advances its
	// recovery point and every later write (append, truncation,
	// retention, flush) returns the same error; reads go on. The caller
	// should take the log offline, as Kafka takes its log directory
	// offline; reopening it runs recovery.
	ErrStorage = errors.New("logstore: storage error")
)
