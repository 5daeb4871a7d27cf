package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// LeaderAndIsrOffline sends req to broker to (LeaderAndIsr is it without the outcomes) and
// also returns, from the per-partition error codes, the partitions the
// broker answered KAFKA_STORAGE_ERROR for (its replicas in an offline log
// dir) and those it answered without error: Kafka's controller takes its
// offline replicas from them (processLeaderAndIsrResponseReceived).
// zkcoord's controller uses it when its BrokerSender has it.
func (c *BrokerClient) LeaderAndIsrOffline(ctx context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) (offline, online []cluster.TopicPartition, err error) {
	kreq, err := leaderAndIsrToKmsg(req, clientLeaderAndIsrVersion, c.cfg.ListenerName)
	if err != nil {
		return nil, nil, fmt.Errorf("LeaderAndIsr to broker %d: %w", to.ID, err)
	}
	kresp, err := c.control(ctx, to, purposeControl, kreq)
	if err != nil {
		return nil, nil, fmt.Errorf("LeaderAndIsr to broker %d: %w", to.ID, err)
	}
	resp := kresp.(*kmsg.LeaderAndISRResponse)
	if err := errorFromCode(resp.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("LeaderAndIsr to broker %d: %w", to.ID, err)
	}
	offline, online = leaderAndIsrOutcomes(resp)
	c.warnFailedPartitions("LeaderAndIsr", to.ID, req.ControllerEpoch, len(resp.Partitions), func(i int) (string, int32, int16) {
		p := &resp.Partitions[i]
		return p.Topic, p.Partition, p.ErrorCode
	})
	return offline, online, nil
}

// leaderAndIsrOutcomes sorts a LeaderAndIsr response's partitions into
// those answered KAFKA_STORAGE_ERROR and those answered without error;
// other errors are in neither.
func leaderAndIsrOutcomes(resp *kmsg.LeaderAndISRResponse) (offline, online []cluster.TopicPartition) {
	for _, p := range resp.Partitions {
		tp := cluster.TopicPartition{Topic: p.Topic, Partition: p.Partition}
		switch err := errorFromCode(p.ErrorCode); {
		case err == nil:
			online = append(online, tp)
		case errors.Is(err, partition.ErrStorage):
			offline = append(offline, tp)
		}
	}
	return offline, online
}
