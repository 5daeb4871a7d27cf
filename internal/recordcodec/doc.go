// Package recordcodec inflates the records section of a compressed Kafka
// v2 record batch as a stream, with a bound on the inflated size, so that
// the produce path can check a compressed batch's records without holding
// them in memory: a compression bomb costs bounded memory and is refused
// once it inflates past the bound. It also compresses (Compress), for the
// log cleaner, which rewrites compressed batches with their own codec;
// Codecs implements logstore.Codec.
//
// AppendBatch is the module's one v2 record batch encoder (length, CRC32C,
// records compressed by the attributes' codec): internal/coordlog's
// coordinator writes, internal/chaos's raw writers and the tests' batches
// use it; only tests of hostile input hand-build wrong bytes.
//
// Codecs are Kafka's: 1 gzip, 2 snappy (a raw block, or the xerial framing
// the Java client writes; Compress writes the xerial framing), 3 lz4 (the
// frame format), 4 zstd. It keeps no state between calls but one shared
// zstd encoder, and is safe for concurrent use.
package recordcodec
