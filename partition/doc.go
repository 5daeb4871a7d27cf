// Package partition holds this broker's replicas: one Replica per partition
// it is assigned, and the Manager that owns them.
//
// A Replica knows its role (leader or follower), leader epoch, assigned
// replicas (AR), in-sync replicas (ISR), its own log end offset (LEO) and the
// high watermark (HW). As leader it validates and appends produced batches,
// assigning offsets; it keeps, per follower, the fetch offset (that
// follower's LEO) and the last time the follower was caught up; the HW is the
// minimum LEO over the ISR and never moves backwards; consumers read only
// below the HW and followers up to the LEO. acks=all waiters are woken by HW
// movement, never by polling.
//
// Idempotent producers: per producer id the replica keeps the producer epoch
// and the last five batches' sequence ranges with their offsets, so a retried
// batch is answered with its original offsets and not appended again, and a
// gap is refused with ErrOutOfOrderSequence. The state is rebuilt from the
// log's batch headers when a replica is opened.
//
// Partition knows nothing of sockets, ZooKeeper or the wire format: it is
// told partition states (PartitionState) and returns results and errors.
//
// Concurrency: Manager.mu guards the replica map; Replica.mu guards role,
// epochs, ISR, HW, LEO, follower state and producer state. A leader holds
// Replica.mu while validating, assigning offsets and appending, and never
// across a network call. Lock order: Manager.mu -> Replica.mu ->
// logstore.Log's internal lock. Manager.changedMu is a leaf lock.
package partition
