// Package observe is the broker's HTTP side: Prometheus metrics with the
// names Kafka's JMX metrics get from the common exporters, and two views of
// this broker's replicas in the seed documents' terms (role, leader epoch,
// AR, ISR, OSR, log start, LEO, HW, the LSO and the open transactions
// (producer id, epoch, first offset) that hold it below the HW, and, on a leader, each follower's LEO,
// records behind, time since caught up and time left before
// replica.lag.time.max.ms removes it from the ISR; for a compacted log,
// its dirty ratio; the replication throttles (KIP-73) that apply to it;
// and, while a reassignment is in progress, its adding and removing
// replicas with, on the leader, what each adding replica has left to
// fetch):
//
//	/metrics         Prometheus text format
//	/v1/partitions   JSON (View)
//	/                an HTML page rendered with html/template that reloads itself
//
// Observer implements partition.Metrics, zkcoord.Metrics and
// protocol.RequestObserver, so those packages report events through small
// interfaces they declare and never import Prometheus. Gauges (under-
// replicated partitions, follower lag, controller state, consumer-group
// lag, each partition's LastStableOffsetLag (HW - LSO), the log cleaner's LogCleaner and LogCleanerManager gauges, and the
// LeaderReplication and FollowerReplication byte-rate of the replication
// quotas) are computed from partition.Manager's PartitionStatus,
// CleanerStatus and ReplicationByteRates and the controller when scraped,
// so a replica that goes away leaves no stale series. cmd/broker starts the listener when http.listener is set.
package observe
