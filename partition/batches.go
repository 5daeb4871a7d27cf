package partition

import (
	"fmt"

	"github.com/kafkazk/broker/logstore"
)

// forEachBatch calls fn for the header of every v2 batch in records,
// without decoding records. It stops at the first error.
func forEachBatch(records []byte, fn func(h logstore.BatchHeader, raw []byte) error) error {
	for len(records) > 0 {
		h, err := logstore.ParseBatchHeader(records)
		if err != nil {
			return err
		}
		size := h.Size()
		if size <= 0 || size > len(records) {
			return fmt.Errorf("%w: batch size %d with %d bytes left", ErrCorruptMessage, size, len(records))
		}
		if err := fn(h, records[:size]); err != nil {
			return err
		}
		records = records[size:]
	}
	return nil
}
