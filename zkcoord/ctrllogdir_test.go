package zkcoord

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kafkazk/broker/cluster"
)

// The scripted controller harness as a broker whose log dirs fail: its
// LeaderAndIsr answers KAFKA_STORAGE_ERROR for the replicas in h.offlineDirs
// (protocol.BrokerClient.LeaderAndIsrOffline), printed as "<- offline".

var _ LeaderAndIsrOfflineSender = (*ctrlHarness)(nil)

func (h *ctrlHarness) LeaderAndIsrOffline(ctx context.Context, to cluster.Broker, req cluster.LeaderAndIsrRequest) (offline, online []cluster.TopicPartition, err error) {
	if err := h.LeaderAndIsr(ctx, to, req); err != nil {
		return nil, nil, err
	}
	for _, pa := range req.Partitions {
		if h.offlineDirs[to.ID][pa.TopicPartition] {
			offline = append(offline, pa.TopicPartition)
		} else {
			online = append(online, pa.TopicPartition)
		}
	}
	if len(offline) > 0 {
		names := make([]string, len(offline))
		for i, tp := range offline {
			names[i] = tp.Topic + "/" + strconv.Itoa(int(tp.Partition))
		}
		h.printf("   <- %d KAFKA_STORAGE_ERROR %s", to.ID, strings.Join(names, ","))
	}
	return offline, online, nil
}

// logDirFail is "logdir_fail ID T/P,...": the broker takes the dir
// offline and writes its log dir event notification.
func (h *ctrlHarness) logDirFail(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("logdir_fail ID T/P,...")
	}
	id, err := strconv.ParseInt(args[0], 10, 32)
	if err != nil {
		return err
	}
	if h.offlineDirs == nil {
		h.offlineDirs = map[int32]map[cluster.TopicPartition]bool{}
	}
	if h.offlineDirs[int32(id)] == nil {
		h.offlineDirs[int32(id)] = map[cluster.TopicPartition]bool{}
	}
	for _, s := range strings.Split(args[1], ",") {
		tp, err := parseTP(s)
		if err != nil {
			return err
		}
		h.offlineDirs[int32(id)][tp] = true
	}
	h.store.putSequential(logDirEventSeqPrefix, encodeLogDirEvent(int32(id)))
	return nil
}

// offlineIn lists the partitions an UpdateMetadata names broker id offline in.
func offlineIn(req *cluster.UpdateMetadataRequest, id int32) []cluster.TopicPartition {
	var out []cluster.TopicPartition
	for _, pi := range req.Partitions {
		if slices.Contains(pi.Offline, id) {
			out = append(out, cluster.TopicPartition{Topic: pi.Topic, Partition: pi.Partition})
		}
	}
	return out
}
