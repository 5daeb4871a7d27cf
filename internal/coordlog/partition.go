package coordlog

import "math"

// OffsetsTopic is the group coordinator's internal topic. txn names it for
// AddOffsetsToTxn without importing group.
const OffsetsTopic = "__consumer_offsets"

// PartitionFor is the partition of an internal topic of n partitions
// holding key (a group id or a transactional id): abs(Java's
// String.hashCode) mod n, with Kafka's Utils.abs, which maps MinInt32 to 0
// (not the producer partitioner's toPositive mask). n <= 0 gives 0.
func PartitionFor(key string, n int32) int32 {
	if n <= 0 {
		return 0
	}
	var h int32
	for _, r := range key {
		// Java hashes UTF-16 code units.
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == math.MinInt32 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return h % n
}
