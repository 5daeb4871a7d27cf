package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors of the frame and header decoder. Each one closes the connection
// that produced it; none is ever answered on the wire.
var (
	// errFrameSize: the 4-byte size prefix is negative, too small to hold a
	// request header, or above socket.request.max.bytes.
	errFrameSize = errors.New("protocol: invalid request size")
	// errMalformed: the header or body could not be parsed.
	errMalformed = errors.New("protocol: malformed request")
	// errUnknownKey: an API key this broker does not serve (Kafka closes
	// the connection with InvalidRequestException).
	errUnknownKey = errors.New("protocol: unknown api key")
	// errUnsupportedVersion: a key we serve at a version outside our range
	// (other than ApiVersions, which is answered).
	errUnsupportedVersion = errors.New("protocol: unsupported api version")
	// errTooManyTags: a request read before authentication carries more
	// tagged fields than maxPreAuthTags (kmsg allocates for every unknown
	// tag, so their count is checked before the body is decoded).
	errTooManyTags = errors.New("protocol: too many tagged fields before authentication")
)

// maxPreAuthTags bounds the tagged fields of each tag buffer (the
// header's and the body's) of a request read before authentication on a
// SASL listener. ApiVersions, SaslHandshake and SaslAuthenticate define
// none; clients send none.
const maxPreAuthTags = 8

// minHeaderBytes is api_key(2) + api_version(2) + correlation_id(4) +
// client_id length(2): the shortest request header v1.
const minHeaderBytes = 10

// request is one decoded request frame.
type request struct {
	key           int16
	version       int16
	correlationID int32
	clientID      string
	// kreq is the decoded body. It is nil for an ApiVersions request at a
	// version above our maximum: Kafka does not parse such a body, it
	// answers UNSUPPORTED_VERSION in a v0 response.
	kreq kmsg.Request
	size int32 // frame size without the prefix, for logging
}

// frameChunkBytes is how much of a frame is allocated before its bytes
// arrive; larger frames grow as data comes in.
const frameChunkBytes = 64 << 10

// readFrame reads one size-prefixed request frame from r: readFrameSize,
// then readFrameBody.
func readFrame(r io.Reader, maxBytes int32) ([]byte, error) {
	size, err := readFrameSize(r, minHeaderBytes, maxBytes)
	if err != nil {
		return nil, err
	}
	return readFrameBody(r, size)
}

// readFrameSize reads an int32 size prefix and checks that it is in
// [minBytes, maxBytes], before anything is allocated for the frame.
func readFrameSize(r io.Reader, minBytes int, maxBytes int32) (int, error) {
	var sizeBuf [4]byte
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return 0, err
	}
	size := int(int32(binary.BigEndian.Uint32(sizeBuf[:])))
	if size < minBytes || size > int(maxBytes) {
		return 0, fmt.Errorf("%w: %d (limit %d)", errFrameSize, size, maxBytes)
	}
	return size, nil
}

// readFrameBody reads a frame body of size bytes (already checked). A
// valid size is still not trusted with new memory: a pooled buffer of the
// size's class is used whole when one is free (that memory exists
// already), but otherwise the buffer starts at 64 KiB and grows (doubling,
// through the pools) only as bytes arrive, so a peer that announces 100 MB
// and stalls holds 64 KiB, not 100 MB. The caller owns the result and may
// give it back with putBuf once nothing aliases it (decoded byte fields,
// such as a Produce's records, do).
func readFrameBody(r io.Reader, size int) ([]byte, error) {
	body := pooledBuf(size)
	if body == nil {
		body = getBuf(min(size, frameChunkBytes))
	}
	for len(body) < size {
		if len(body) == cap(body) {
			want := min(2*cap(body), size)
			grown := pooledBuf(want)
			if grown == nil {
				grown = make([]byte, 0, want)
			}
			grown = append(grown, body...)
			putBuf(body)
			body = grown
		}
		n, err := r.Read(body[len(body):min(cap(body), size)])
		body = body[:len(body)+n]
		if err != nil && len(body) < size {
			putBuf(body)
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}

// parseRequest decodes the request header by hand (v1, or v2 with tagged
// fields after the client id for flexible versions; v0, without a client
// id, for ControlledShutdown v0 as in Kafka) and the body through kmsg.
// Keys and versions outside apis are errors, except ApiVersions above its
// range, which returns a request with a nil kreq.
func parseRequest(frame []byte, apis []apiRange) (*request, error) {
	return parseRequestBounded(frame, apis, false)
}

// parseRequestBounded is parseRequest; with preAuth, the request must be
// one of the keys served before authentication (ApiVersions,
// SaslHandshake, SaslAuthenticate), and a tag buffer of its header or
// body with more than maxPreAuthTags tags is refused (errTooManyTags)
// before the body is decoded.
func parseRequestBounded(frame []byte, apis []apiRange, preAuth bool) (*request, error) {
	if len(frame) < minHeaderBytes {
		return nil, fmt.Errorf("%w: frame of %d bytes is shorter than a header", errMalformed, len(frame))
	}
	req := &request{
		key:           int16(binary.BigEndian.Uint16(frame[0:2])),
		version:       int16(binary.BigEndian.Uint16(frame[2:4])),
		correlationID: int32(binary.BigEndian.Uint32(frame[4:8])),
		size:          int32(len(frame)),
	}
	rest := frame[8:]
	if req.key != controlledShutdownKey || req.version != 0 {
		n := int16(binary.BigEndian.Uint16(rest[0:2]))
		rest = rest[2:]
		switch {
		case n == -1: // null client id, treated as empty as Kafka does
		case n < 0 || int(n) > len(rest):
			return nil, fmt.Errorf("%w: client id length %d with %d bytes left", errMalformed, n, len(rest))
		default:
			req.clientID = string(rest[:n])
			rest = rest[n:]
		}
	}

	min, max, ok := findVersions(apis, req.key)
	if !ok {
		return req, fmt.Errorf("%w: %d", errUnknownKey, req.key)
	}
	if req.version < min || req.version > max {
		if req.key == apiVersionsKey {
			return req, nil
		}
		return req, fmt.Errorf("%w: key %d version %d (supported %d-%d)", errUnsupportedVersion, req.key, req.version, min, max)
	}
	kreq := kmsg.RequestForKey(req.key)
	if kreq == nil {
		// Cannot happen for a key in our table; treat as unknown.
		return req, fmt.Errorf("%w: %d", errUnknownKey, req.key)
	}
	kreq.SetVersion(req.version)
	if kreq.IsFlexible() {
		var err error
		if preAuth {
			if err = checkPreAuthTags(req.key, rest); err != nil {
				return req, err
			}
		}
		if rest, err = skipTags(rest); err != nil {
			return req, err
		}
	}
	if err := kreq.ReadFrom(rest); err != nil {
		return req, fmt.Errorf("%w: key %d version %d body: %v", errMalformed, req.key, req.version, err)
	}
	req.kreq = kreq
	return req, nil
}

// checkPreAuthTags walks a flexible pre-authentication request after its
// client id without allocating: the header's tag buffer, then the body's
// fields up to its tag buffer (ApiVersions v3+: two compact strings;
// SaslAuthenticate v2+: compact bytes). Either tag buffer holding more
// than maxPreAuthTags tags is errTooManyTags. A frame too short for the
// walk is left to the decoder to refuse.
func checkPreAuthTags(key int16, b []byte) error {
	tagCount := func(b []byte) error {
		n, _, err := uvarint(b)
		if err == nil && n > maxPreAuthTags {
			return fmt.Errorf("%w: key %d with %d tags (limit %d)", errTooManyTags, key, n, maxPreAuthTags)
		}
		return nil
	}
	if err := tagCount(b); err != nil {
		return err
	}
	b, err := skipTags(b)
	if err != nil {
		return nil
	}
	var fields int
	switch key {
	case apiVersionsKey:
		fields = 2
	case saslAuthenticateKey:
		fields = 1
	default:
		return fmt.Errorf("%w: key %d is not served before authentication", errUnknownKey, key)
	}
	for ; fields > 0; fields-- {
		var n uint64
		if n, b, err = uvarint(b); err != nil {
			return nil
		}
		if n > 0 {
			n-- // compact length + 1; 0 is null
		}
		if n > uint64(len(b)) {
			return nil
		}
		b = b[n:]
	}
	return tagCount(b)
}

// skipTags skips a header tag buffer: an unsigned varint count, then for
// each tag an unsigned varint key, an unsigned varint size and that many
// bytes. Every size is checked against what remains.
func skipTags(b []byte) ([]byte, error) {
	count, b, err := uvarint(b)
	if err != nil {
		return nil, err
	}
	for ; count > 0; count-- {
		if _, b, err = uvarint(b); err != nil {
			return nil, err
		}
		var size uint64
		if size, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if size > uint64(len(b)) {
			return nil, fmt.Errorf("%w: header tag of %d bytes with %d left", errMalformed, size, len(b))
		}
		b = b[size:]
	}
	return b, nil
}

// uvarint reads an unsigned varint of at most 5 bytes (a uint32).
func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n > 5 || v > 1<<32-1 {
		return 0, nil, fmt.Errorf("%w: bad unsigned varint", errMalformed)
	}
	return v, b[n:], nil
}

// appendResponse frames resp: size, correlation id, the response header
// tag buffer when the response is flexible (never for ApiVersions, whose
// response header is always v0), then the body.
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
