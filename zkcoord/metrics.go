package zkcoord

import (
	"time"

	"github.com/kafkazk/broker/cluster"
)

// Metrics receives the controller's events for monitoring (the broker's
// observe package turns them into Kafka's ControllerStats). It is called
// from the controller loop and must not block.
type Metrics interface {
	// LeaderElection is called after one controller event (a broker
	// failure or startup, a controlled shutdown, a preferred-replica
	// election, a topic config change, a failover) gave partitions a new
	// live leader; took is how long the event took to handle (Kafka's
	// LeaderElectionRateAndTimeMs times the same events).
	LeaderElection(partitions int, took time.Duration)
	// UncleanLeaderElection is called for each partition given a leader
	// from outside its ISR.
	UncleanLeaderElection(tp cluster.TopicPartition)
}

// noMetrics is the Metrics of a Session configured without one.
type noMetrics struct{}

func (noMetrics) LeaderElection(int, time.Duration)            {}
func (noMetrics) UncleanLeaderElection(cluster.TopicPartition) {}

// metrics is cfg.Metrics or a no-op.
func (s *Session) metrics() Metrics {
	if s.cfg.Metrics == nil {
		return noMetrics{}
	}
	return s.cfg.Metrics
}

// OfflinePartitionsCount is the number of partitions without a live
// leader as this broker's controller last saw them, and 0 when this broker
// is not the controller (Kafka's OfflinePartitionsCount).
func (s *Session) OfflinePartitionsCount() int {
	s.mu.Lock()
	c := s.ctrl
	s.mu.Unlock()
	if c == nil {
		return 0
	}
	return int(c.offline.Load())
}
