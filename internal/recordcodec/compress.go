package recordcodec

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// xerialBlockBytes is the uncompressed size of each snappy block in the
// xerial framing, snappy-java's default block size.
const xerialBlockBytes = 32 << 10

var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdErr  error
)

// zstdEncoder is one shared encoder: EncodeAll is safe for concurrent use.
func zstdEncoder() (*zstd.Encoder, error) {
	zstdOnce.Do(func() {
		zstdEnc, zstdErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
	})
	return zstdEnc, zstdErr
}

// Compress appends src compressed with codec to dst and returns the
// result, in the form Kafka's Java client writes: gzip, snappy in the
// xerial framing of snappy-java (which every client reads), the lz4 frame
// format, and a zstd frame.
func Compress(codec int8, dst, src []byte) ([]byte, error) {
	switch codec {
	case Gzip:
		buf := bytes.NewBuffer(dst)
		zw := gzip.NewWriter(buf)
		if _, err := zw.Write(src); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return buf.Bytes(), nil
	case Snappy:
		dst = append(dst, xerialMagic...)
		dst = binary.BigEndian.AppendUint32(dst, 1) // version
		dst = binary.BigEndian.AppendUint32(dst, 1) // compatible version
		for len(src) > 0 {
			n := min(len(src), xerialBlockBytes)
			block := s2.EncodeSnappy(nil, src[:n])
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(block)))
			dst = append(dst, block...)
			src = src[n:]
		}
		return dst, nil
	case LZ4:
		buf := bytes.NewBuffer(dst)
		zw := lz4.NewWriter(buf)
		if _, err := zw.Write(src); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return buf.Bytes(), nil
	case Zstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return enc.EncodeAll(src, dst), nil
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownCodec, codec)
	}
}

// Decompress appends the inflated form of src, compressed with codec, to
// dst, failing with ErrTooLarge once more than maxBytes would be added.
func Decompress(codec int8, dst, src []byte, maxBytes int) ([]byte, error) {
	r, err := NewReader(codec, src, int64(maxBytes))
	if err != nil {
		return nil, err
	}
	buf := bytes.NewBuffer(dst)
	_, err = io.Copy(buf, r)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Codecs implements logstore.Codec (by its method set: recordcodec does not
// import logstore) with Compress and Decompress, for the log cleaner.
type Codecs struct{}

// Compress is the package's Compress.
func (Codecs) Compress(codec int8, dst, src []byte) ([]byte, error) { return Compress(codec, dst, src) }

// Decompress is the package's Decompress.
func (Codecs) Decompress(codec int8, dst, src []byte, maxBytes int) ([]byte, error) {
	return Decompress(codec, dst, src, maxBytes)
}
