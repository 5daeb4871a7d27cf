// Package coordlog is what the group coordinator (group, over
// __consumer_offsets) and the transaction coordinator (txn, over
// __transaction_state) share of their internal topics: the v2 record batch
// they write (EncodeBatch) and read back (Walk), the loop that reads a
// partition when the coordinator becomes its leader (Load), and how they
// start goroutines and place ids on partitions.
//
// EncodeBatch writes one batch of key/value records (a nil value is a
// tombstone) with base offset 0, leader epoch -1, base sequence -1, CRC32C
// filled in, compressed with Kafka's codec id (recordcodec), and, for a
// transactional offset commit, the producer's id and epoch and the
// transactional attribute bit. Walk reads whole batches of one Read
// compressed or not, stops without an error at a batch cut off by the end
// of the read, and returns every other failure wrapping ErrCorrupt with the
// offset after the last batch read whole, so a loader retries from there
// instead of skipping records. WalkOptions.Strict adds the CRC check and
// takes a length field below a batch header as corruption; SkipControl
// skips transaction markers.
//
// Load reads a partition from its log start to the log end offset it had
// when the load began, waiting for the high watermark to get there so that
// all it reads is committed, retrying failed reads after 100 ms and an
// unreadable batch with a backoff doubling to 1 s, never skipping it. The
// coordinator supplies what differs: how records apply, whether its
// incarnation is stale, and how it sleeps (txn's tests replace the clock).
//
// Goroutines is the coordinators' goroutine starter: counted, refused once
// closed, guarded by the coordinator's own mutex. PartitionFor is the
// partition of an internal topic holding a group or transactional id.
//
// The package keeps no global state and its functions are safe for
// concurrent use. It may import partition and cluster types, never
// protocol, zkcoord, logstore, group or txn (txn's TestForbiddenImports
// checks it).
package coordlog
