package coordlog

import (
	"sync"
	"testing"
)

// TestGoroutines: GoLocked runs fn until CloseLocked, which reports true
// only the first time; later GoLocked refuses and Wait returns once the
// started goroutines have.
func TestGoroutines(t *testing.T) {
	var mu sync.Mutex
	var g Goroutines
	release := make(chan struct{})
	ended := make(chan struct{}, 1)
	mu.Lock()
	if !g.GoLocked(func() { <-release; ended <- struct{}{} }) {
		t.Fatal("open Goroutines refused")
	}
	if g.ClosedLocked() || !g.CloseLocked() || g.CloseLocked() || !g.ClosedLocked() {
		t.Fatal("CloseLocked must close once")
	}
	if g.GoLocked(func() { t.Error("ran after close") }) {
		t.Fatal("closed Goroutines started fn")
	}
	mu.Unlock()
	close(release)
	g.Wait()
	select {
	case <-ended:
	default:
		t.Fatal("Wait returned before the goroutine ended")
	}
}

// TestGoroutinesClose: Go takes the mutex, and Close calls closing with it
// held only the first time, then waits, without it, for a goroutine that
// needs the mutex to finish.
func TestGoroutinesClose(t *testing.T) {
	var mu sync.Mutex
	var g Goroutines
	started := make(chan struct{})
	if !g.Go(&mu, func() {
		close(started)
		mu.Lock() // needs the mutex after Close took and released it
		mu.Unlock()
	}) {
		t.Fatal("open Goroutines refused")
	}
	<-started
	calls := 0
	closing := func() {
		if mu.TryLock() {
			t.Error("closing called without the mutex held")
			mu.Unlock()
		}
		calls++
	}
	g.Close(&mu, closing)
	g.Close(&mu, closing)
	if calls != 1 {
		t.Fatalf("closing called %d times, want 1", calls)
	}
	if g.Go(&mu, func() { t.Error("ran after Close") }) {
		t.Fatal("closed Goroutines started fn")
	}
}
