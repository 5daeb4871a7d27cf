package main

import (
	"fmt"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
)

// offsetsLog is group.Log over the replica manager: Append, WaitCommitted
// and Read come from partition.Manager, the log end offset from its status.
type offsetsLog struct {
	*partition.Manager
}

func (l offsetsLog) LogEndOffset(tp cluster.TopicPartition) (int64, error) {
	for _, st := range l.PartitionStatus() {
		if st.TopicPartition == tp {
			return st.LogEndOffset, nil
		}
	}
	return 0, fmt.Errorf("%w: %s", partition.ErrUnknownTopicOrPartition, tp)
}

// newCoordinator builds the group coordinator from the broker config.
func newCoordinator(cfg *Config, replicas *partition.Manager, logCfg group.Config) *group.Coordinator {
	return group.New(coordinatorConfig(cfg, replicas, logCfg))
}

// coordinatorConfig is the group.Config of the broker config: logCfg with
// the group.* and offsets.* settings and the replica manager as its Log.
func coordinatorConfig(cfg *Config, replicas *partition.Manager, logCfg group.Config) group.Config {
	delay := cfg.GroupInitialRebalanceDelay
	if delay == 0 {
		delay = -1 // group.Config's zero means Kafka's default
	}
	logCfg.BrokerID = cfg.BrokerID
	logCfg.NumPartitions = cfg.OffsetsTopicNumPartitions
	logCfg.InitialRebalanceDelay = delay
	logCfg.MinSessionTimeout = cfg.GroupMinSessionTimeout
	logCfg.MaxSessionTimeout = cfg.GroupMaxSessionTimeout
	logCfg.OffsetsRetention = cfg.OffsetsRetention
	logCfg.OffsetsRetentionCheckInterval = cfg.OffsetsRetentionCheckInterval
	logCfg.CommitTimeout = cfg.OffsetsCommitTimeout
	logCfg.CompressionCodec = cfg.OffsetsTopicCompressionCodec
	logCfg.Log = offsetsLog{replicas}
	return logCfg
}
