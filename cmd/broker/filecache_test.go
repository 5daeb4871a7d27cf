package main

import (
	"math"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

func TestFileCacheCapacity(t *testing.T) {
	for soft, want := range map[uint64]int{
		20000:          10000,
		1024:           512,
		100:            minFileCache, // a tiny limit still leaves the cache some room
		math.MaxUint64: maxFileCache, // RLIM_INFINITY
	} {
		if got := capacityFor(soft); got != want {
			t.Errorf("capacityFor(%d) = %d, want %d", soft, got, want)
		}
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	// Go raised the soft limit to the hard one at start.
	if got := fileCacheCapacity(zerolog.Nop()); got != capacityFor(rl.Cur) || (rl.Cur == rl.Max && got != capacityFor(rl.Max)) {
		t.Errorf("fileCacheCapacity = %d for limits %d/%d", got, rl.Cur, rl.Max)
	}
}
