package logstore

// syncDeferredLocked makes durable what the request path left to the
// log's first flush: a log Open found without data (creationPending) gets
// its directory's entry in the parent and its own entries fsynced, and
// the leader epochs Assign deferred are written (the temporary file
// fsynced, renamed) and their rename fsynced with the directory. Every
// path that is about to advance the recovery point calls it first, so
// that the recovery point never covers an offset whose directory, segment
// entries or leader epoch a crash could still take away; the segment
// data themselves are the caller's to fsync, as ever. On a failure the
// log fails (ErrStorage). Caller holds l.fmu.
func (l *Log) syncDeferredLocked() error {
	_, err := l.syncDeferredDirLocked()
	return err
}

// syncDeferredDirLocked is syncDeferredLocked, reporting whether it
// fsynced the directory (which makes every entry created in it so far
// durable, so that the caller need not fsync it again).
func (l *Log) syncDeferredDirLocked() (dirSynced bool, err error) {
	pending := l.creationPending.Load()
	wrote, err := l.epochs.persist(false)
	if err != nil {
		return false, l.fail("write leader epochs", err)
	}
	if !pending && !wrote {
		return false, nil
	}
	switch {
	case pending && l.leaveParent.Load():
		l.parentOwed.Store(true) // CloseLeavingParent's caller fsyncs it
	case pending:
		if err := syncParent(l.fs, l.dir); err != nil {
			return false, l.fail("sync creation", err)
		}
	}
	if err := l.syncDirLocked("sync creation"); err != nil {
		return false, err
	}
	l.creationPending.Store(false)
	return true, nil
}

// neverHeldDataLocked reports whether the log is as Open found it without
// data and nothing has made it durable since: Close need not flush it, as
// a crash that takes it away leaves what the next Open makes again, an
// empty log, and its leader epochs all start at or after its end, where
// Open drops them. A failed log is not: its Close returns the failure.
// Caller holds l.wmu.
func (l *Log) neverHeldDataLocked() bool {
	return l.creationPending.Load() && l.failure.Load() == nil && len(l.segments) == 1 && l.segments[0].size == 0
}

// NeverHeldData reports whether the log is as Open found it, without
// data, and nothing has made it durable since: Close then writes nothing
// (a crash leaves what the next Open makes again, an empty log), where a
// Flush would fsync its creation and leader epochs. A broker's shutdown
// closes such a log without flushing it first.
func (l *Log) NeverHeldData() bool {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.neverHeldDataLocked()
}

// markCleanEmpty says the .log, just created empty, needs no fsync: it
// holds no data, and its entry in the directory is made durable by the
// fsync of the directory (syncDeferredLocked), so a FileCache evicting it
// before anything is written does not fsync it. A write marks it dirty as
// ever. Caller owns the log (Open).
func (h *segFile) markCleanEmpty() {
	if c := h.cache; c != nil {
		c.mu.Lock()
		h.dirty = false
		c.mu.Unlock()
		return
	}
	h.dirty = false
}
