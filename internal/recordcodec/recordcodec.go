package recordcodec

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Kafka's codec ids, the low three bits of a batch's attributes.
const (
	Gzip   int8 = 1
	Snappy int8 = 2
	LZ4    int8 = 3
	Zstd   int8 = 4
)

var (
	// ErrTooLarge is returned by a Reader once the inflated data passes the bound.
	ErrTooLarge = errors.New("recordcodec: inflated records exceed the bound")
	// ErrUnknownCodec is returned by NewReader for a codec id Kafka does not define.
	ErrUnknownCodec = errors.New("recordcodec: unknown codec")
)

// xerialMagic starts snappy data framed by the Java client's snappy-java.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// NewReader returns a reader of the inflated bytes of data compressed with
// codec, failing with ErrTooLarge after maxBytes. Close releases the
// decoder.
func NewReader(codec int8, data []byte, maxBytes int64) (io.ReadCloser, error) {
	var r io.Reader
	closer := func() error { return nil }
	switch codec {
	case Gzip:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		r, closer = zr, zr.Close
	case Snappy:
		r = &snappyReader{src: data, max: maxBytes}
	case LZ4:
		r = lz4.NewReader(bytes.NewReader(data))
	case Zstd:
		zr, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(uint64(maxBytes)+1))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		r, closer = zr, func() error { zr.Close(); return nil }
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownCodec, codec)
	}
	return &bounded{r: r, left: maxBytes, close: closer}, nil
}

// bounded fails a read that would go past the bound.
type bounded struct {
	r     io.Reader
	left  int64
	close func() error
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Anything more is over the bound; a clean end is not.
		var one [1]byte
		if n, err := b.r.Read(one[:]); n > 0 {
			return 0, ErrTooLarge
		} else if err != nil {
			return 0, err
		}
		return 0, nil
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		// zstd refuses a frame whose declared size or window passes its
		// memory limit (the bound) before inflating it: the same verdict.
		err = fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	return n, err
}

func (b *bounded) Close() error { return b.close() }

// snappyReader inflates a raw snappy block, or xerial-framed blocks one at
// a time, checking each block's claimed length before decoding it.
type snappyReader struct {
	src    []byte
	max    int64
	out    []byte
	framed bool
	began  bool
}

func (s *snappyReader) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if err := s.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

func (s *snappyReader) next() error {
	if !s.began {
		s.began = true
		if len(s.src) >= 16 && bytes.HasPrefix(s.src, xerialMagic) {
			s.framed, s.src = true, s.src[16:]
		} else {
			return s.decode(s.src, true)
		}
	}
	if !s.framed || len(s.src) == 0 {
		return io.EOF
	}
	if len(s.src) < 4 {
		return fmt.Errorf("snappy: truncated xerial block length")
	}
	n := int(binary.BigEndian.Uint32(s.src))
	s.src = s.src[4:]
	if n < 0 || n > len(s.src) {
		return fmt.Errorf("snappy: xerial block of %d bytes with %d left", n, len(s.src))
	}
	block := s.src[:n]
	s.src = s.src[n:]
	return s.decode(block, false)
}

func (s *snappyReader) decode(block []byte, last bool) error {
	l, err := s2.DecodedLen(block)
	if err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	if int64(l) > s.max {
		return ErrTooLarge
	}
	out, err := s2.Decode(nil, block)
	if err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	if last {
		s.src = nil
	}
	s.out = out
	if len(out) == 0 && last {
		return io.EOF
	}
	return nil
}
