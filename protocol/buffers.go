package protocol

import (
	"context"
	"math/bits"
	"sync"
)

// Pooled byte buffers for request frames and encoded responses.
//
// Every request used to get a fresh frame buffer (grown by doubling from
// 64 KiB) and a fresh response buffer (grown by append): for 1 MiB
// produce and fetch traffic that is several MiB of garbage per request,
// and the profile showed ~16% of broker CPU in GC and madvise, with the
// copies themselves slowed by first touches of returned pages. The pools
// below keep buffers by power-of-two size class; sync.Pool empties itself
// over two GC cycles, so idle connections hold nothing.

const (
	minBufShift = 12 // 4 KiB: smaller buffers are not pooled
	maxBufShift = 26 // 64 MiB: larger buffers are not pooled
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

// bufClass is the pool holding buffers of capacity at least n: the
// smallest class with 1<<shift >= n; ok is false above the largest.
func bufClass(n int) (class int, ok bool) {
	shift := max(bits.Len(uint(max(n, 1)-1)), minBufShift)
	if shift > maxBufShift {
		return 0, false
	}
	return shift - minBufShift, true
}

// pooledBuf returns an empty pooled buffer with capacity at least n, or
// nil if the pool has none: the caller decides how to allocate, so that
// a pool miss never allocates more than the caller wants to trust.
func pooledBuf(n int) []byte {
	class, ok := bufClass(n)
	if !ok {
		return nil
	}
	if p, _ := bufPools[class].Get().(*[]byte); p != nil {
		return (*p)[:0]
	}
	return nil
}

// getBuf returns an empty buffer with capacity at least n, pooled if one
// is free, else newly allocated at the size of n's class.
func getBuf(n int) []byte {
	if b := pooledBuf(n); b != nil {
		return b
	}
	if class, ok := bufClass(n); ok {
		return make([]byte, 0, 1<<(class+minBufShift))
	}
	return make([]byte, 0, n)
}

// putBuf gives b back to the pools. The caller must hold no reference to
// b or to anything sliced from it.
func putBuf(b []byte) {
	c := cap(b)
	if c < 1<<minBufShift || c >= 1<<(maxBufShift+1) {
		return
	}
	// The largest class whose size b can serve: floor(log2(cap)).
	class := bits.Len(uint(c)) - 1 - minBufShift
	b = b[:0]
	bufPools[class].Put(&b)
}

// byteBudget is queued.max.request.bytes: a global bound on the bytes of
// request frames being read or handled. A connection acquires a frame's
// size after reading its size prefix and before allocating for it, and
// releases it when the frame's buffer is no longer needed. Waiters are
// served in order, so a large frame is not starved by small ones. A frame
// larger than the whole budget takes the whole budget (Kafka's memory pool
// likewise lets one allocation overdraw), so it waits for everyone else
// rather than forever.
type byteBudget struct {
	capacity int64 // <= 0: unbounded, acquire never waits

	mu      sync.Mutex
	avail   int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes are granted
}

func newByteBudget(capacity int64) *byteBudget {
	return &byteBudget{capacity: capacity, avail: capacity}
}

// acquire waits for n bytes (capped at the capacity) and returns how many
// it took, for release; an error only if ctx ended first.
func (b *byteBudget) acquire(ctx context.Context, n int64) (int64, error) {
	if b.capacity <= 0 {
		return 0, nil
	}
	n = min(n, b.capacity)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.avail >= n {
		b.avail -= n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.mu.Unlock()
			b.release(n)
			return 0, ctx.Err()
		default:
		}
		for i, x := range b.waiters {
			if x == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		b.grantLocked() // the head may have changed
		b.mu.Unlock()
		return 0, ctx.Err()
	}
}

// release returns n bytes taken by acquire.
func (b *byteBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.avail += n
	b.grantLocked()
	b.mu.Unlock()
}

// inUse is how many bytes are taken, for tests.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.capacity - b.avail
}

// grantLocked wakes waiters in order while their bytes are free. Caller
// holds b.mu.
func (b *byteBudget) grantLocked() {
	for len(b.waiters) > 0 && b.avail >= b.waiters[0].n {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.avail -= w.n
		close(w.ready)
	}
}
