package coordlog

import "sync"

// Goroutines starts a coordinator's goroutines, counted so that closing
// can wait for them, and refuses to start any once closed (STYLE.md §2,
// Lifecycle). It has no lock of its own: the coordinator's mutex guards
// it, so that closing, and whatever the coordinator unloads when it
// closes, is one step for every caller holding that mutex. Call every
// method but Wait with it held. The zero value is open.
type Goroutines struct {
	closed bool
	wg     sync.WaitGroup
}

// GoLocked starts fn unless closed, and reports whether it did.
func (g *Goroutines) GoLocked(fn func()) bool {
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn()
	}()
	return true
}

// Go is GoLocked for a caller not holding mu, the coordinator's mutex.
func (g *Goroutines) Go(mu sync.Locker, fn func()) bool {
	mu.Lock()
	defer mu.Unlock()
	return g.GoLocked(fn)
}

// Close closes under mu, the coordinator's mutex, calling closing with mu
// held the first time only (to cancel and unload what the coordinator
// owns), then waits without mu for every goroutine started. It is safe to
// call twice.
func (g *Goroutines) Close(mu sync.Locker, closing func()) {
	mu.Lock()
	if g.CloseLocked() {
		closing()
	}
	mu.Unlock()
	g.Wait()
}

// ClosedLocked reports whether CloseLocked was called.
func (g *Goroutines) ClosedLocked() bool { return g.closed }

// CloseLocked refuses every later GoLocked. It reports whether this call
// closed: false the second time, so that Close is safe twice.
func (g *Goroutines) CloseLocked() bool {
	if g.closed {
		return false
	}
	g.closed = true
	return true
}

// Wait returns once every goroutine GoLocked started has returned. Call
// it after CloseLocked, without the coordinator's mutex, which the
// goroutines may need to finish.
func (g *Goroutines) Wait() { g.wg.Wait() }
