package recordcodec

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRoundTrip: what franz-go's compressors produce (snappy in both
// raw and xerial framing as franz-go writes it, gzip, lz4, zstd) inflates
// back to the input, and a bound below the size fails with ErrTooLarge.
func TestRoundTrip(t *testing.T) {
	in := bytes.Repeat([]byte("kafka records "), 20000) // 280 KB
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
		id    int8
	}{
		{"gzip", kgo.GzipCompression(), Gzip},
		{"snappy", kgo.SnappyCompression(), Snappy},
		{"lz4", kgo.Lz4Compression(), LZ4},
		{"zstd", kgo.ZstdCompression(), Zstd},
	} {
		t.Run(c.name, func(t *testing.T) {
			comp, err := kgo.DefaultCompressor(c.codec)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			data, _ := comp.Compress(&buf, in)
			r, err := NewReader(c.id, data, int64(len(in)))
			if err != nil {
				t.Fatal(err)
			}
			out, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(out, in) {
				t.Fatalf("inflated %d bytes (err %v), want %d", len(out), err, len(in))
			}
			r, err = NewReader(c.id, data, int64(len(in))-1)
			if err == nil {
				_, err = io.ReadAll(r)
				r.Close()
			}
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("bound one below the size: %v, want ErrTooLarge", err)
			}
		})
	}
	if _, err := NewReader(5, []byte("x"), 10); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("codec 5: %v", err)
	}
}

// TestZstdDeclaredSizeOverBound: a zstd frame that declares its content
// size (as EncodeAll writes it) above the bound fails with ErrTooLarge,
// like every other codec, not with the decoder's own error, so that the
// produce path answers it as too large rather than invalid.
func TestZstdDeclaredSizeOverBound(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	data := enc.EncodeAll(make([]byte, 1<<20), nil)
	r, err := NewReader(Zstd, data, 64<<10)
	if err == nil {
		_, err = io.Copy(io.Discard, r)
		r.Close()
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("1 MiB zstd frame with a 64 KiB bound: %v, want ErrTooLarge", err)
	}
}

// TestCompressRoundTrip: what Compress writes for each codec inflates back
// to the input through NewReader, through Decompress (appending after a
// prefix already in dst), and through franz-go's decompressor, which reads
// what Kafka clients read.
func TestCompressRoundTrip(t *testing.T) {
	in := bytes.Repeat([]byte("compacted records "), 10000) // 180 KB: several xerial blocks
	dec := kgo.DefaultDecompressor()
	for _, c := range []struct {
		name  string
		id    int8
		codec kgo.CompressionCodecType
	}{
		{"gzip", Gzip, kgo.CodecGzip},
		{"snappy", Snappy, kgo.CodecSnappy},
		{"lz4", LZ4, kgo.CodecLz4},
		{"zstd", Zstd, kgo.CodecZstd},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, err := Compress(c.id, []byte("prefix"), in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, []byte("prefix")) {
				t.Fatalf("Compress did not append to dst")
			}
			data = data[len("prefix"):]
			out, err := Decompress(c.id, []byte("x"), data, len(in))
			if err != nil || !bytes.Equal(out[1:], in) || out[0] != 'x' {
				t.Fatalf("Decompress: %d bytes, err %v", len(out), err)
			}
			if _, err := Decompress(c.id, nil, data, len(in)-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Decompress with a bound one short: %v, want ErrTooLarge", err)
			}
			got, err := dec.Decompress(data, c.codec)
			if err != nil || !bytes.Equal(got, in) {
				t.Fatalf("franz-go decompress: %d bytes, err %v", len(got), err)
			}
		})
	}
	if _, err := Compress(7, nil, in); !errors.Is(err, ErrUnknownCodec) {
		t.Fatalf("codec 7: %v", err)
	}
}
