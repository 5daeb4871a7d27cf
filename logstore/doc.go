// Package logstore keeps one partition's records in append-only segment
// files, in Kafka's on-disk layout, and recovers them after a crash.
//
// # What it owns
//
// A Log is a partition directory (<topic>-<partition>) of segments named by
// base offset. It assigns offsets on leader appends, stores follower
// appends as they came, serves reads by offset and by timestamp, rolls
// segments, applies retention and the flush policy, truncates, and keeps
// the directory's leader-epoch-checkpoint (LeaderEpochCache) in step with
// the batches. LogEndOffset is the next offset to be written, so valid
// reads are in [LogStartOffset, LogEndOffset). The package also reads and
// writes the per-log-directory offset checkpoint files
// (recovery-point-offset-checkpoint, replication-offset-checkpoint,
// log-start-offset-checkpoint, cleaner-offset-checkpoint) for its callers,
// and lends them its atomic file replacement (WriteFileAtomic) for the
// other small files they keep. It runs Kafka's log cleaner over one log at
// a time (Log.Clean; see "Log cleaner" below). For transactions it builds,
// parses and appends Kafka's transaction markers (BuildControlBatch,
// ParseControlBatch, Log.AppendControlAsLeader) and keeps each segment's
// transaction index (see "Transaction index" below).
//
// # What it refuses
//
// Logstore knows nothing of replicas, leaders, the high watermark or
// ZooKeeper: callers decide what to append, when it counts as committed and
// up to which offset a reader may see (Read's maxOffset). It handles v2
// record batches only (magic 2; older formats are ErrInvalidRecord) and
// works per batch: only the cleaner decodes, decompresses (through the
// caller's Codec) or re-encodes records, so offsets found by timestamp and
// truncation points are batch boundaries. It does no scheduling of
// cleaning (the caller picks the log and the moment), and keeps no
// producer state, producer snapshots, last stable offset or idempotence
// checks: the caller (partition) tracks transactions and tells the log
// which ones were aborted (AppendAbortedTxn), and it never preallocates or
// mmaps index files: indexes live in memory (about 0.5% of the log's size
// at the default index interval) and are written to disk by the flush that
// follows a roll (by the roll itself when the recovery point has reached
// the roll offset), by any Flush, flush by policy or Close that finds
// entries of a segment other than the active one not yet in its files, by
// Close for the active one, and on truncation and recovery (see "Open
// files" below).
//
// # Open files
//
// Index files (.index, .timeindex, .txnindex) are never held open: each
// is opened to be loaded (Open), to take the entries not yet in it and be
// fsynced (the background flush of a rolled segment, or the roll itself
// when the recovery point has reached the roll offset; Flush and the
// flush policy for every segment but the active one with anything
// pending, whatever its place relative to the recovery point; Close for
// every segment with anything pending, the active one included),
// to be rewritten or truncated (truncation, recovery, a cleaner swap, an
// aborted transaction's entry) and closed again at once, all through the
// FS, so MemFS sees every operation. A flush leaves the active segment's
// offset and time indexes in memory, since an Open without CleanShutdown
// rebuilds the last segment's indexes anyway: an fsyncing append opens no
// index file. Its .txnindex is fsynced with it, entries being durable
// below the recovery point. An index file changed since its last fsync
// is fsynced by the flush that needs it; one unchanged is not opened. So
// the flush after a roll fsyncs through a descriptor other than the one
// the roll-time writes went through (the entries are in fact written by
// that flush, in the same open, unless a truncation rewrote the file
// before): Linux reports a write-back error not yet seen by anyone to
// the next fsync of the file on any descriptor (since 4.16), so a lost
// index write still fails the flush.
//
// A segment's .log is held open for the segment's life, unless
// Config.Files names a FileCache shared by the broker's logs: then every
// .log, the active one included, goes through a handle that opens it on
// demand (os.O_RDWR, never O_CREATE or O_TRUNC, except when the segment is
// created) and the cache closes the least recently used descriptor that no
// operation has pinned (a pread, write, truncate, stat or fsync pins it
// for its length) once it holds its capacity, making room before it opens,
// so the bound holds at every instant unless more descriptors than that
// are pinned at once (it then goes over rather than wait, and sheds the
// surplus as they are released). A .log with writes since its last fsync
// is fsynced before its descriptor is closed: a write-back error reported
// only to the closed descriptor would otherwise be lost; if that fsync
// fails, the file's next Sync returns the error, so the log fails
// (ErrStorage) rather than advance its recovery point. A reopen that fails
// is the I/O error it is: a read returns it, a write fails the log
// (ErrStorage), as any failed write it cannot undo. A handle without a
// write since its last fsync is not reopened to be fsynced. The cleaner's
// new segment stays outside the cache, open, from its creation as
// <base>.log.cleaned until the swap renames it to <base>.log. So a log
// holds no index descriptor at all, and one .log descriptor per segment
// without a FileCache, or a share of the cache's bound with one. Index
// opens, a .log opened over the bound while every cached one is pinned,
// and the cleaner's segment are outside the bound: FileCache's
// documentation says how much headroom below RLIMIT_NOFILE a broker leaves
// for them. An open that meets EMFILE or ENFILE anyway closes idle cached
// descriptors (least recently used first, fsyncing dirty ones) and is
// retried a few times over about 30 ms before it fails, so a brief
// shortage does not take a log offline. The hot paths allocate nothing for
// the handle while the file is open (a cache hit is a mutex, a counter and
// an LRU unlink).
//
// # File system seam
//
// Every file operation (segments, indexes, the offset checkpoints,
// WriteFileAtomic, the leader-epoch-checkpoint) goes through an FS
// (Config.FS; the FS variants of the checkpoint helpers). OSFS, the
// default, hands out *os.File itself, so the seam costs the append path
// no wrapper and no allocation. MemFS is a strict in-memory FS for tests,
// after pebble's vfs.NewStrictMem: it fails any operation on demand and
// can crash to the last synced state (unsynced data is lost; a file
// created, renamed or removed without a directory fsync reverts).
//
// # Flushing, the recovery point and recovery
//
// Appends write into the page cache. A roll schedules a background flush
// of everything below the new segment (Kafka's
// flushUptoOffsetExclusive(newSegment.baseOffset)): it fsyncs the
// directory, then each rolled segment's .log and indexes, and only then
// advances RecoveryPoint to the new segment's base. One flusher goroutine
// at most runs per log: rolls during its fsyncs raise its target and it
// loops until no request is pending. Flush, the
// FlushMessages/FlushMs policy and Close do the same up to LogEndOffset.
// What needs an fsync is judged by each segment's pending state, not by
// its place relative to RecoveryPoint: a flush that takes RecoveryPoint
// to LogEndOffset (the flush policy, Flush) fsyncs the active segment's
// .log but leaves its offset and time indexes in memory, so when that
// segment then rolls it lies wholly below RecoveryPoint with index
// entries in no file. So the roll itself writes and fsyncs them before
// the append returns (a checkpoint of that RecoveryPoint makes Open trust
// them), and every later Flush, flush by policy and Close (under the
// writer lock, which retention's deletions take too) write and fsync the
// index files of any segment still so pending (and an unsynced
// .txnindex), without fsyncing its .log again.
// So RecoveryPoint is always an offset below which segment data, indexes
// (but the active segment's, which Open rebuilds unless Close wrote them)
// and directory entries are all fsynced; the caller checkpoints it
// (recovery-point-offset-checkpoint) and passes it back to Open. A
// truncation that takes RecoveryPoint down is made durable at once, and
// the appends after it fsync until RecoveryPoint is back where it was, so
// that a checkpoint written before the truncation never makes Open trust
// rewritten, unsynced segments. A truncation deletes the later segments
// first, newest first, and (below the recovery point) fsyncs the
// directory before it cuts the segment it ends in (Kafka's order), so a
// crash cannot keep the cut and bring the later segments back.
//
// # Durability of new logs and of leader epochs
//
// Nothing needs to be durable until a recovery point claims it, so the
// request path that creates replicas and makes leaders (a LeaderAndIsr
// for thousands of partitions) fsyncs nothing:
//
//   - Open of a log that holds no data (its directory missing, or only
//     one empty segment, clean shutdown or not) creates what is missing
//     and fsyncs neither the parent directory, nor the directory, nor
//     the segment files (a new .log is not even dirty for a FileCache
//     eviction). It marks the log creationPending. In a directory it
//     has just made it lists nothing more, reads no leader-epoch file
//     and creates only the .log: the segment's index files
//     (segmentCreateFresh) are created with their first entry or by the
//     first write that fsyncs them (a roll's flush, Close), and that
//     flush fsyncs the directory once more for their entries, as Open
//     rebuilds a segment with data whose index is missing.
//   - Assign on a Log's leader epoch cache changes memory only and marks
//     the cache dirty. (Truncations of the cache, rare, still write it
//     at once.)
//   - Every path about to advance RecoveryPoint (Flush, the flush policy,
//     the background flush after a roll, Close, and
//     TruncateFullyAndStartAt, which sets it) first calls
//     syncDeferredLocked: a dirty cache is written (temporary file
//     fsynced, renamed), the parent directory is fsynced if the creation
//     is pending, and then the directory, which makes the rename and the
//     segment files' entries durable. The segment data are the flush's
//     to fsync, as ever. An append that spans a roll assigns the epochs
//     of the batches before the roll first, so the background flush
//     writes them.
//   - Close of a log still creationPending with one empty segment writes
//     nothing: the next Open finds it empty again, or missing, and makes
//     it anew. NeverHeldData tells a caller so (a broker's shutdown then
//     skips the Flush and the producer snapshot), and a flush fsyncs
//     the directory once, the deferred fsync of it standing for the one
//     its new segment files would need.
//
// The argument: the recovery point R a caller may checkpoint only ever
// comes from such a path, so when R covers offset o, the directory, its
// entry in the parent, the segment files, o's data and the leader epoch
// entries of every batch below R were fsynced before R was published.
// After a crash Open trusts below the checkpointed R and rebuilds above
// it: the last segment and every one above R are scanned, their batches'
// epochs assigned, and the cache truncated at the recovered end. What a
// crash can lose is therefore only what no recovery point covered: a
// whole log that was never flushed (it opens empty, and its epochs, all
// starting at or after its end of 0, go as Open drops those), unflushed
// batches (as before), and epoch entries that were assigned and not
// flushed, which either started at or after the recovered end (dropped
// anyway) or belong to batches above R, whose scan assigns them again.
// An epoch a new leader assigned at the log end with no batch under it
// changes no OffsetsForLeaderEpoch answer's offset: the end of the epoch
// before it is the start of the next one either way. Writing the file at
// Assign without an fsync (as the rename would invite) would add nothing
// after a crash and risk a renamed, empty file: any later fsync of the
// directory (a roll's flush, a transaction index write, a clean pass)
// could make the rename durable before the data, and Open would refuse
// the file as corrupt. Kafka writes and fsyncs the checkpoint on every
// assign (its LeaderEpochFileCache flushes only truncations
// asynchronously, KAFKA-15046), since its recovery point does not wait
// for the epoch file.
//
// # Clean shutdown
//
// Close writes the pending index entries of every segment and fsyncs its
// index files and .txnindex (each segment with anything pending: entries
// not yet in the files, a file to rewrite, a change not yet fsynced; a
// segment with none opens no file), the active segment's after its data,
// adding an offset index entry for the last batch of the active segment
// and a time index entry for its largest timestamp, so that the index
// files then describe the whole log. A Close that returns an error does
// not promise this, and neither does a later Close, which returns the
// same error: the caller must not write Kafka's clean-shutdown marker
// (.kafka_cleanshutdown). Nor may the marker outlive the first write
// after an Open that trusted it: the caller removes it durably (unlink,
// then fsync the log dir) before it lets any log of that dir take a
// write, a truncation, retention or a clean pass, since a crash after
// such a change would otherwise leave the marker beside index files that
// no longer describe the log (Kafka deletes the marker as it loads the
// logs, before they serve). With
// Config.CleanShutdown (the caller found the marker) Open trusts the
// recovery point and every index file Close wrote: each segment's indexes
// get the sanity checks of a trusted segment (sizes, entries inside the
// segment and increasing) and the log's end comes from the last
// segment's last offset index entry: Open reads the batch headers from
// that entry's position to the end (the one header of the last batch,
// after Close) and checks they are whole batches up to the file's size,
// the first being the batch the entry names. No other .log byte is read,
// and no segment is fsynced. A segment whose index is missing or fails a
// check, or a last segment whose tail does not match, is recovered by a
// scan as below (damage in the last segment cuts a torn tail; in an
// earlier segment below the recovery point it is ErrCorrupt); so is
// everything after an interrupted clean pass. The first batch's
// timestamp, which segment.ms counts from, is then read by the first
// append (Kafka loads its rollingBasedTimestamp lazily too). The leader
// epochs come from leader-epoch-checkpoint, which Close wrote.
// Recovery leaves the last segment's indexes as Close does (the final
// entries added), so both opens agree.
//
// Open follows Kafka's LogLoader.recoverLog: segments wholly below the
// recovery point are trusted (only their indexes are sanity-checked and,
// if needed, rebuilt); every later segment, and always the last, is
// validated batch by batch, and at the first torn or invalid batch, or a
// segment that ends before the next one starts, that segment is
// truncated there and every later segment deleted (logged at Error with
// what was dropped; followers fetch it again). A trusted segment whose
// last batch (read from its last index entry on) ends before the next
// segment is validated so too, rather than opened with a hole. Other
// damage found in a trusted segment while rebuilding its index is
// ErrCorrupt (Kafka would truncate it and leave a gap).
//
// An fsync that fails is fatal for the log (ErrStorage, Kafka's
// KAFKA_STORAGE_ERROR): a retried fsync can report success for data the
// kernel dropped, so the log never advances RecoveryPoint again and
// refuses every later write; the background flush logs its failure and
// the next write returns it. The caller takes the log offline; reopening
// it runs recovery.
//
// # Log cleaner
//
// Clean(CleanConfig) is one pass of Kafka's LogCleaner.doClean over one
// log; the caller (partition's cleaner manager) owns threads, scheduling,
// the checkpoint file and metrics:
//
//   - Choose: Cleanable(checkpoint, upper, now, min.compaction.lag.ms)
//     gives the cleanable range and DirtyRatio (dirty bytes over bytes
//     from the log start to the first uncleanable offset) to compare with
//     min.cleanable.dirty.ratio, and FirstDirtyTimestampMs for
//     max.compaction.lag.ms.
//   - Clean: CleanConfig carries the checkpoint (FirstDirtyOffset), the
//     caller's upper bound (UpperOffset: Kafka's first unstable offset,
//     at most the high watermark), NowMs, MinCompactionLagMs,
//     DeleteRetentionMs, an OffsetMap per cleaner thread
//     (NewOffsetMap(log.cleaner.dedupe.buffer.size / threads), reused),
//     the Codec (internal/recordcodec.Codecs) and a Throttler
//     (NewRateThrottler(log.cleaner.io.max.bytes.per.second), shared).
//   - Record: CleanStats.EndOffset is the new checkpoint, to be written
//     with WriteCleanerOffsetCheckpoint; MapFull says another pass is due
//     at once. The rest of CleanStats feeds the metrics
//     (cleaner-recopy-percent = BytesWritten/BytesRead of the rewrite,
//     max-clean-time-secs = Elapsed). ErrCleanAborted (the log was
//     truncated or retention ran meanwhile, or the caller closed
//     CleanConfig.Abort, checked at every batch read or written and
//     ending a RateThrottler wait at once) is retried later; an error
//     wrapping ErrStorage took the log offline; ErrCorrupt marks it
//     uncleanable.
//
// A pass never touches the active segment, nor segments from the first
// one whose largest timestamp is within min.compaction.lag.ms of NowMs,
// nor records at or above UpperOffset. It maps key -> last offset over the
// dirty section [FirstDirtyOffset, first uncleanable offset), keyed
// records only, control batches and aborted transactions skipped; when the map is full (90% of its
// slots, Kafka's load factor) it stops at the first key that does not
// fit, and EndOffset is that record's offset (else the first uncleanable
// offset). It then rewrites every segment from the log start to the one
// holding EndOffset-1, in groups of consecutive segments of at most
// SegmentBytes together (and a relative offset range that fits an int32),
// keeping a record when it is at or above EndOffset, or keyed with an
// offset at or above its key's in the map, and either has a value or lies
// in a segment modified after the delete horizon (the modification time
// of the clean section's last segment minus DeleteRetentionMs, or 0 when
// nothing is clean yet: Kafka's deleteHorizonMs for its pre-KIP-534
// records); keyless records below EndOffset are dropped. A batch keeps its
// base offset, last offset delta, producer id, epoch, base sequence,
// leader epoch, attributes and first timestamp (Kafka would move the first
// timestamp to the first kept record's; the records' timestamp deltas,
// kept as they are, stay right either way); kept records are copied byte
// for byte (headers included), compressed again with the batch's codec;
// numRecords, maxTimestamp (CreateTime) and the CRC are recomputed. A batch with nothing dropped is copied as it is. A batch
// left empty is kept as an empty batch (no records, same offsets and
// producer fields: Kafka's RETAIN_EMPTY) when it is its producer's last
// batch, or last data batch, in the log, so the producer's last sequence
// survives, and dropped otherwise. Transactions are compacted as Kafka's
// LogCleaner does (CleanedTransactionMetadata): see "Transactional
// compaction" below. A new segment whose last batch ends before
// the next segment begins gets an empty batch at the next base - 1 (the
// group's largest timestamp and last leader epoch, no producer), so that
// segments stay contiguous for recovery. It keeps the modification time
// of the last segment it replaces (ChtimesFS).
//
// Crash safety, as Kafka's replaceSegments: the group is written to
// <base>.log.cleaned and fsynced without the writer lock; then, under
// wmu and fmu, the pass checks the group is still in the log unchanged
// (segGen, the segment pointers and sizes; else ErrCleanAborted and the
// .cleaned file is removed), renames it to <base>.log.swap and fsyncs the
// directory (the commit point), swaps the list under mu, deletes the old
// segments' files, fsyncs the directory, renames the .swap to <base>.log
// and writes and fsyncs its indexes and the directory. Open deletes any
// .cleaned file and completes any <base>.log.swap: the segments whose base
// offsets lie in [base, the swap's next offset) are deleted, the swap
// renamed into place and its indexes rebuilt. A failure after the commit
// point fails the log (ErrStorage), and reopening completes the swap.
//
// A cleaned segment with transaction index entries also gets
// <base>.txnindex.cleaned, written and fsynced with the .log.cleaned. The
// swap renames it to <base>.txnindex.swap and fsyncs the directory before
// the commit point, and renames it to <base>.txnindex after the .log.swap
// is renamed. So on Open a .txnindex.swap beside a .log.swap is completed
// with it; beside a .log.cleaned it is deleted (uncommitted); alone, its
// .log was already renamed, and it is renamed into place. The group check
// also aborts the group when one of its segments gained an index entry
// during the pass.
//
// # Transactional compaction
//
// The pass takes the aborted transactions from the transaction index
// (every segment's, as of its start) and follows the log in offset order,
// as Kafka's CleanedTransactionMetadata: a transactional batch belongs to
// an aborted transaction from the entry's first offset until its
// producer's next ABORT marker.
//
//   - Records of aborted transactions are not mapped, so they never
//     supersede a committed record of the same key, and their batches
//     are removed (Kafka's discardBatchRecords), except a producer's last
//     (data) batch, kept empty.
//   - Records of committed transactions, and of transactions with no
//     marker yet, are compacted like any others.
//   - A COMMIT or ABORT marker is kept while the pass found a batch of its
//     transaction before it (an ABORT also while data before it has no
//     index entry); otherwise it is removed once its segment is past the
//     delete horizon, the one tombstones use (Kafka's
//     retainLegacyDeletesAndTxnMarkers). A producer's last batch is kept
//     even if it is a marker, for producer state.
//   - The cleaned segment's index holds the entries of the ABORT markers
//     it keeps with data before them (an entry whose data is all gone is
//     dropped, as Kafka's cleanedIndex drops it), in marker order.
//   - UpperOffset (the caller passes min(high watermark, last stable
//     offset)) bounds all of it: batches and markers at or above it are
//     copied as they are, and a transaction whose ABORT marker is at or
//     above it keeps its data (the marker may still be truncated away)
//     and is not mapped.
//
// # Transaction index
//
// Each segment may have <base>.txnindex (Kafka's TransactionIndex): one
// AbortedTxn entry per aborted transaction whose ABORT marker lies in the
// segment, in marker order. Logstore does not decide what was aborted: the
// caller appends the marker (AppendControlAsLeader, or a follower append)
// and then the entry (AppendAbortedTxn) with the first offset and last
// stable offset it tracks; an entry whose segment already holds one with
// the same last offset is ignored, so a replay after a restart is
// idempotent. The check is per segment, not against the last entry of the
// whole log: after an unclean shutdown an older segment's index may have
// lost entries that a newer one kept, and the replay adds them again; one
// that falls before entries of its segment rewrites that segment's file
// atomically (temporary file, fsync, rename, directory fsync), so every
// file stays in marker order. Any I/O failure of the index (create, write,
// rewrite, fsync, truncate) fails the log (ErrStorage), as a failed fsync
// does: its marker is in the log and its entry is not, so the log refuses
// every later write until it is reopened and the caller replays the
// markers. The file is created on the segment's first entry; the entries
// live in memory too (34 bytes each), so CollectAbortedTxns, which a
// read_committed fetch calls, does no I/O, and with no entry in the whole
// log (a count kept with them) it does not look at the segments at all.
// Entries are written to the page cache and fsynced with their segment
// (Flush, the flush policy, the roll flush, Close); an entry whose marker
// is already below the recovery point (in a segment below it, or in the
// active segment after the flush policy fsynced the marker) is fsynced at
// once. TruncateTo drops the entries at or above the new end, and every
// deletion of a segment (truncation, retention, DeleteRecords, the
// cleaner's swap) deletes its file. Open loads every .txnindex (one
// without its .log is deleted), cuts a torn last entry, and removes from
// each segment the entries at or past its recovered end; an entry of
// another version, below its segment's base or out of order is ErrCorrupt
// naming the file. Entries are durable below the recovery point only:
// after a crash, a marker at or above the recovery point given to Open may
// have survived (written back by the kernel) while its unsynced entry did
// not. So the caller replays the markers from the lower of its producer
// snapshot's offset and that recovery point, calling AppendAbortedTxn
// again (ignored for entries that survived); logstore cannot rebuild an
// entry itself, as it keeps no producer state to know a transaction's
// first offset.
//
// # Concurrency
//
// A Log allows one writer at a time and any number of concurrent readers.
// Writers (appends, AppendAbortedTxn, truncation, retention, flush, close, SetConfig)
// serialise on Log.wmu and hold it across file writes and fsyncs, except
// the background flush of rolled segments: it holds Log.fmu, not wmu, so
// appends go on during its fsyncs. A writer takes fmu inside wmu only
// when it changes files the flush may be syncing or lowers the recovery
// point: a truncation into a non-active segment, below the recovery point
// or removing segments; AppendAbortedTxn into a non-active segment; retention and IncrementLogStartOffset deleting a
// segment that ends above the recovery point; Flush, the flush policy,
// full truncation and Close. Appends, truncations within the active
// segment above the recovery point, and deletions of segments wholly
// below it (or of none) never wait for the background fsync. Close waits
// for the background flusher. Log.mu (a
// RWMutex) guards the segment list and what readers see of each segment:
// readers (Read, OffsetForTimestamp) hold it shared for the whole read,
// including the pread, while the writer takes it exclusively only to
// publish a batch after it has been written in full, and to change the
// segment list or truncate a file. So a Read runs during an append's write
// and never sees a partly written batch. LogEndOffset, LogStartOffset and
// RecoveryPoint are atomics, readable without a lock. Close (and a full
// truncation that fails) marks the log closed while holding both locks, so
// a writer tests the mark under Log.wmu alone and a reader under Log.mu,
// and neither sees it change before it unlocks. LeaderEpochCache has its
// own mutex and is safe on its own. A clean pass holds Log.cmu (one pass
// per log at a time) for its whole length; it reads segment files and
// writes its .cleaned file holding no other lock, and takes wmu and fmu
// (and mu for the list swap) only to swap a group in, so appends wait only
// for the swap's renames and fsyncs. It reads the non-active segments
// without mu because their bytes change only under wmu+mu with segGen
// bumped, which the swap checks. The lock order is
//
//	Log.cmu -> Log.wmu -> Log.fmu -> Log.mu -> LeaderEpochCache.mu
//
// and a caller may hold its own replica lock outside all of them
// (partition's Replica.mu -> Log.wmu). A FileCache has one mutex of its
// own, taken inside any of these and never held across a file operation
// (an eviction's fsync and close, and a reopen, run outside it); it takes
// no Log lock, so an eviction of another log's file needs none of that
// log's locks.
//
// # Formats
//
// Segments: 00000000000000012345.log holds v2 record batches back to back,
// exactly as produced except for the base offset and partition leader epoch
// (and, for LogAppendTime topics, the timestamp type bit and max timestamp,
// with the CRC recomputed). Header (61 bytes, big endian): baseOffset int64,
// batchLength int32 (bytes after this field), partitionLeaderEpoch int32,
// magic int8 = 2, crc uint32 (CRC32C of attributes to the end), attributes
// int16, lastOffsetDelta int32, firstTimestamp int64, maxTimestamp int64,
// producerId int64, producerEpoch int16, baseSequence int32, numRecords int32.
//
// .index: 8-byte entries [int32 lastOffset-base][int32 position of that
// batch], one after every Config.IndexIntervalBytes of batches; a lookup
// takes the last entry at or below the target and scans batch headers
// forward. .timeindex: 12-byte entries [int64 maxTimestamp so far][int32
// relative offset of the batch that first reached it], added with index
// entries when the max timestamp has grown, and once more on roll and
// close. An index that is missing or fails its sanity check is rebuilt
// from the .log.
//
// Cleaned batches: as produced batches, but numRecords may be less than
// lastOffsetDelta+1 (dropped records leave offset gaps), down to 0 (an
// empty batch). Recovery and follower appends accept them; leader
// appends still demand numRecords == lastOffsetDelta+1 > 0. During a clean
// pass a directory may hold <base>.log.cleaned and <base>.log.swap, and
// <base>.txnindex.cleaned and <base>.txnindex.swap.
//
// .txnindex: 34-byte entries, big endian: version int16 (0), producer id
// int64, first offset int64, last offset (of the ABORT marker) int64,
// last stable offset int64 (when the marker was appended), Kafka's
// AbortedTxn. Control batches: attributes transactional|control (0x30),
// one record with key version int16 (0), type int16 (0 ABORT, 1 COMMIT)
// and value version int16 (0), coordinator epoch int32 (Kafka's
// EndTransactionMarker); base sequence -1.
//
// Checkpoints: "0\n<count>\n" then one "<topic> <partition> <offset>" line
// per partition (offset checkpoints) or "<leaderEpoch> <startOffset>" per
// epoch (leader-epoch-checkpoint), replaced atomically (tmp file, fsync,
// rename, fsync of the directory; for a Log's deferred epochs, at its
// next flush, whose fsync of the directory covers the rename).
//
// # Invariants
//
//   - Batches in a segment have increasing offsets in [base, next base), and
//     their offsets relative to the base fit an int32; a segment's size fits
//     an int32.
//   - Segments never exceed SegmentBytes, except that a single batch
//     larger than it is refused (ErrRecordListTooLarge). (A cleaned
//     segment is at most the sum of the segments it replaced, which were
//     at most SegmentBytes together.)
//   - Every batch was CRC-checked on append and, when it lies at or above
//     the recovery point or in the last segment, again on open. Reads check
//     framing only.
//   - Appends write with plain writes into the page cache; rolls (in the
//     background), Flush, FlushMessages, MaybeFlush/FlushMs and Close
//     fsync. RecoveryPoint is the offset below which everything is
//     fsynced; Open re-validates from there.
//   - On open, damage at or above the recovery point is a torn tail: the
//     log is cut at the first bad batch. Below it, damage found while
//     rebuilding an index returns ErrCorrupt.
//   - Each segment starts where the one before ends: a follower batch
//     that starts above the log end offset (a gap a cleaned leader log
//     left) and rolls starts its new segment at the log end offset, below
//     its first batch, as a cleaned segment keeps its group's first base
//     (Kafka rolls at the batch's base instead). Only a gap wider than a
//     relative offset (an int32) moves the new base into it. Recovery
//     takes a gap after any segment for a lost tail and deletes the later
//     segments; the cleaner ends a rewritten segment that would stop short
//     of the next with an empty batch, which followers replicate as any
//     other. (A cleaner that leaves gaps at segment ends, as Kafka's
//     does, must exempt compacted logs.)
//   - The leader epoch cache never holds an epoch starting above
//     LogEndOffset (at it only the one a new leader assigns before its
//     first append, which Open drops), nor before LogStartOffset.
//   - A transaction index entry lies in the segment holding its
//     LastOffset, below LogEndOffset; LastOffsets increase across the
//     whole log; FirstOffset <= LastOffset.
package logstore
