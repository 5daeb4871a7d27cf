package logstore

// CloseHandlers closes the log's files without flushing anything (Kafka's
// UnifiedLog.closeHandlers), for a log whose directory failed: nothing
// more is written to that disk. The recovery point stays where the last
// flush left it, so a reopen recovers the rest. Every method called after
// it returns ErrClosed; Close after it returns nil.
func (l *Log) CloseHandlers() error {
	return l.close(closeDiscarded)
}
