package group

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/kafkazk/broker/internal/recordcodec"
)

// codecNone is Kafka's codec id 0: no compression.
const codecNone int8 = 0

// xerialHeader starts snappy data as the Java client's snappy-java frames
// it (magic, version 1, minimum compatible version 1), which every Kafka
// reader accepts.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

// xerialBlockBytes is snappy-java's default block size.
const xerialBlockBytes = 32 << 10

var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdErr  error
)

// compress compresses the records of a batch with codec, as Kafka's
// producers do for that codec: gzip, snappy (xerial-framed), lz4 (frame
// format) or zstd. recordcodec inflates all four.
func compress(codec int8, records []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch codec {
	case recordcodec.Gzip:
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(records); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
	case recordcodec.Snappy:
		buf.Write(xerialHeader)
		for len(records) > 0 {
			n := min(len(records), xerialBlockBytes)
			block := s2.EncodeSnappy(nil, records[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(block))))
			buf.Write(block)
			records = records[n:]
		}
	case recordcodec.LZ4:
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(records); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
	case recordcodec.Zstd:
		zstdOnce.Do(func() { zstdEnc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)) })
		if zstdErr != nil {
			return nil, fmt.Errorf("zstd: %w", zstdErr)
		}
		return zstdEnc.EncodeAll(records, nil), nil
	default:
		return nil, fmt.Errorf("%w: %d", recordcodec.ErrUnknownCodec, codec)
	}
	return buf.Bytes(), nil
}
