package protocol

// StopReplica (key 5), versions 0-3, served only with Config.ControlPlane.
//
// The controller tells this broker to stop replicas, and to delete them
// (topic deletion, reassignment away) when asked (reference §2.6).
//
//   - v0 lists partitions ungrouped with a request-wide DeletePartitions;
//     v1-v2 group them by topic and add BrokerEpoch; v2 is flexible. v3
//     (KIP-570) moves deletion into each partition and adds each
//     partition's leader epoch (-2 for a deletion, -1 for none); v4 is
//     KRaft's.
//   - Fencing as for LeaderAndIsr (admitControl): STALE_BROKER_EPOCH,
//     STALE_CONTROLLER_EPOCH, for the whole request.
//   - Decoded into cluster.StopReplicaRequest for ControlPlane.StopReplica.
//     LeaderEpochs holds the v3 epochs other than -1 (nil before v3 or
//     when there are none). Because the value type has one
//     DeletePartitions for the whole request, a v3 request that mixes
//     deleting and non-deleting partitions becomes two calls, the
//     non-deleting partitions first. Per-partition errors map through the
//     error table (FENCED_LEADER_EPOCH for a stale leader epoch); a call's
//     error fails the whole request.
//   - The response lists every requested partition, in request order.
//   - Authorization: ClusterAction on the cluster (admitControl), as
//     LeaderAndIsr.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

func (s *Server) handleStopReplica(ctx context.Context, rc *reqContext, req *kmsg.StopReplicaRequest) (kmsg.Response, error) {
	calls, order := stopReplicaFromKmsg(req)
	resp := req.ResponseKind().(*kmsg.StopReplicaResponse)
	log := s.log.With().Str("remote_addr", rc.remoteAddr).Int32("correlation_id", rc.correlationID).
		Int32("controller_id", req.ControllerID).Int32("controller_epoch", req.ControllerEpoch).Logger()

	brokerEpoch := int64(-1)
	if req.Version >= 1 {
		brokerEpoch = req.BrokerEpoch
	}
	errs := make(map[cluster.TopicPartition]error)
	release, err := s.admitControl(ctx, rc, req.ControllerID, req.ControllerEpoch, brokerEpoch, req.Version >= 1)
	if err == nil {
		for _, c := range calls {
			var perr map[cluster.TopicPartition]error
			if perr, err = s.cfg.ControlPlane.StopReplica(ctx, c); err != nil {
				break
			}
			for tp, e := range perr {
				errs[tp] = e
			}
		}
		release()
	}
	var all int16
	if err != nil {
		all = errorCode(&log, err)
		resp.ErrorCode = all
	}
	resp.Partitions = make([]kmsg.StopReplicaResponsePartition, 0, len(order))
	for _, tp := range order {
		rp := kmsg.NewStopReplicaResponsePartition()
		rp.Topic, rp.Partition = tp.Topic, tp.Partition
		rp.ErrorCode = all
		if err == nil {
			rp.ErrorCode = errorCode(&log, errs[tp])
		}
		resp.Partitions = append(resp.Partitions, rp)
	}
	return resp, nil
}

// stopReplicaFromKmsg decodes req into one cluster request, or two when a
// v3 request mixes deleting and non-deleting partitions (non-deleting
// first), and returns every partition in request order.
func stopReplicaFromKmsg(req *kmsg.StopReplicaRequest) ([]cluster.StopReplicaRequest, []cluster.TopicPartition) {
	base := cluster.StopReplicaRequest{
		ControllerID:    req.ControllerID,
		ControllerEpoch: req.ControllerEpoch,
		BrokerEpoch:     -1,
	}
	if req.Version >= 1 {
		base.BrokerEpoch = req.BrokerEpoch
	}
	var order []cluster.TopicPartition
	if req.Version < 3 {
		base.DeletePartitions = req.DeletePartitions
		for _, t := range req.Topics {
			if req.Version == 0 {
				order = append(order, cluster.TopicPartition{Topic: t.Topic, Partition: t.Partition})
				continue
			}
			for _, p := range t.Partitions {
				order = append(order, cluster.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		base.Partitions = order
		return []cluster.StopReplicaRequest{base}, order
	}

	keep, del := base, base
	del.DeletePartitions = true
	for _, t := range req.Topics {
		for _, p := range t.PartitionStates {
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			order = append(order, tp)
			r := &keep
			if p.Delete {
				r = &del
			}
			r.Partitions = append(r.Partitions, tp)
			if p.LeaderEpoch != -1 {
				if r.LeaderEpochs == nil {
					r.LeaderEpochs = make(map[cluster.TopicPartition]int32)
				}
				r.LeaderEpochs[tp] = p.LeaderEpoch
			}
		}
	}
	var calls []cluster.StopReplicaRequest
	if len(keep.Partitions) > 0 || len(del.Partitions) == 0 {
		calls = append(calls, keep)
	}
	if len(del.Partitions) > 0 {
		calls = append(calls, del)
	}
	return calls, order
}

// stopReplicaToKmsg encodes r at version. From v3 each partition carries
// r.DeletePartitions and its epoch from r.LeaderEpochs (-1 if absent).
func stopReplicaToKmsg(r cluster.StopReplicaRequest, version int16) *kmsg.StopReplicaRequest {
	req := kmsg.NewPtrStopReplicaRequest()
	req.Version = version
	req.ControllerID = r.ControllerID
	req.ControllerEpoch = r.ControllerEpoch
	req.BrokerEpoch = r.BrokerEpoch
	req.DeletePartitions = r.DeletePartitions
	if version == 0 {
		for _, tp := range r.Partitions {
			kt := kmsg.NewStopReplicaRequestTopic()
			kt.Topic, kt.Partition = tp.Topic, tp.Partition
			req.Topics = append(req.Topics, kt)
		}
		return req
	}
	topics, byTopic := topicOrder(r.Partitions, func(tp cluster.TopicPartition) string { return tp.Topic })
	for _, t := range topics {
		kt := kmsg.NewStopReplicaRequestTopic()
		kt.Topic = t
		for _, tp := range byTopic[t] {
			if version < 3 {
				kt.Partitions = append(kt.Partitions, tp.Partition)
				continue
			}
			ps := kmsg.NewStopReplicaRequestTopicPartitionState()
			ps.Partition = tp.Partition
			ps.LeaderEpoch = -1
			if e, ok := r.LeaderEpochs[tp]; ok {
				ps.LeaderEpoch = e
			}
			ps.Delete = r.DeletePartitions
			kt.PartitionStates = append(kt.PartitionStates, ps)
		}
		req.Topics = append(req.Topics, kt)
	}
	return req
}
