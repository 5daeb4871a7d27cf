package partition

// Wakes collects the wake-ups of long-polling fetches that several
// changes of replicas owe, so that they go out once: a produce request
// appending to hundreds of partitions wakes each waiting fetch session
// once, after its last append, rather than once per partition (Kafka's
// ReplicaManager completes delayed fetches through its ActionQueue after
// the whole request is appended). A follower's fetcher does the same for
// the partitions of one fetch response. The zero value is empty; a Wakes
// belongs to one goroutine.
type Wakes struct{ w wake }

// Pending reports whether a wake-up was collected and not yet sent.
func (ws *Wakes) Pending() bool { return ws.w != 0 }

// Wake sends the wake-ups ws collected, if any, and empties it.
func (m *Manager) Wake(ws *Wakes) {
	if ws == nil || ws.w == 0 {
		return
	}
	w := ws.w
	ws.w = 0
	m.notifyChanged(w)
}
