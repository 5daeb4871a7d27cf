package partition

import (
	"github.com/kafkazk/broker/logstore"
)

// forEachBatch calls fn for the header and bytes of every v2 batch in
// records (logstore.BatchIter), without decoding records. It stops at the
// first error: fn's, or the iterator's framing error (logstore.ErrCorrupt,
// which mapLogError turns into ErrCorruptMessage).
func forEachBatch(records []byte, fn func(h logstore.BatchHeader, raw []byte) error) error {
	it := logstore.NewBatchIter(records)
	for it.Next() {
		if err := fn(it.Header(), it.Batch()); err != nil {
			return err
		}
	}
	return it.Err()
}
