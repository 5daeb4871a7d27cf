package protocol

// LeaderAndIsr (key 4), versions 0-4, served only with Config.ControlPlane.
//
// The controller tells this broker which of its replicas lead and which
// follow (reference §2.6).
//
//   - v0-v1 list partition states ungrouped, each naming its topic; v2+
//     group them by topic and carry the receiver's BrokerEpoch (KIP-380).
//     IsNew from v1. v3+ carry AddingReplicas/RemovingReplicas of a
//     reassignment in progress (KIP-455), passed on in
//     cluster.PartitionAssignment (and dropped when encoding below v3). v4
//     is flexible. v5 adds topic ids and the request type, which we do not
//     have.
//   - Fencing (admitControl): any request before this broker registered
//     (Config.BrokerEpoch() is 0) answers BROKER_NOT_AVAILABLE, which the
//     controller retries; a BrokerEpoch other than -1 and older than
//     Config.BrokerEpoch() answers STALE_BROKER_EPOCH; a controller epoch
//     below the highest seen answers STALE_CONTROLLER_EPOCH. Each fails
//     the whole request: the top-level error code and every partition's
//     carry it, as Kafka's getErrorResponse does.
//   - LiveLeaders carry one host:port per broker, on the controller's
//     inter-broker listener; they are decoded as brokers with one
//     PLAINTEXT endpoint named after the listener the request arrived on
//     (the same inter-broker listener), epoch 0 and no rack.
//   - A partition state without a zkVersion (below 0) answers
//     INVALID_REQUEST for that partition and is left out of what the
//     control plane gets: a leader would write its ISR changes on that
//     version, and -1 makes ZooKeeper's setData unconditional. Kafka's
//     controller always sends the state znode's version.
//   - The decoded cluster.LeaderAndIsrRequest goes to
//     ControlPlane.LeaderAndIsr. Its per-partition errors become the
//     partitions' codes through the error table (UNKNOWN_TOPIC_OR_PARTITION
//     for a partition not assigned here, STALE_CONTROLLER_EPOCH for a
//     leader epoch that is not newer, KAFKA_STORAGE_ERROR, ...); its
//     error fails the whole request like a fencing error.
//   - The response lists every requested partition, in request order.
//     The request decodes into slices sized from it: a 10,000-partition
//     request costs two allocations per partition (kmsg's lists).
//   - Authorization: ClusterAction on the cluster, checked first in
//     admitControl (CLUSTER_AUTHORIZATION_FAILED for the whole request, no
//     epoch adopted).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

func (s *Server) handleLeaderAndIsr(ctx context.Context, rc *reqContext, req *kmsg.LeaderAndISRRequest) (kmsg.Response, error) {
	creq := leaderAndIsrFromKmsg(req, rc.listener)
	resp := req.ResponseKind().(*kmsg.LeaderAndISRResponse)
	log := s.log.With().Str("remote_addr", rc.remoteAddr).Int32("correlation_id", rc.correlationID).
		Int32("controller_id", creq.ControllerID).Int32("controller_epoch", creq.ControllerEpoch).Logger()

	var (
		errs map[cluster.TopicPartition]error
		err  error
	)
	release, err := s.admitControl(ctx, rc, creq.ControllerID, creq.ControllerEpoch, creq.BrokerEpoch, req.Version >= 2)
	refused := map[cluster.TopicPartition]bool{}
	if err == nil {
		valid := creq
		valid.Partitions = make([]cluster.PartitionAssignment, 0, len(creq.Partitions))
		for _, p := range creq.Partitions {
			if p.LeaderAndIsr.ZkVersion < 0 {
				refused[p.TopicPartition] = true
				log.Warn().Str("topic", p.TopicPartition.Topic).Int32("partition", p.TopicPartition.Partition).
					Int32("zk_version", p.LeaderAndIsr.ZkVersion).Msg("refusing partition state without a zkVersion")
				continue
			}
			valid.Partitions = append(valid.Partitions, p)
		}
		errs, err = s.cfg.ControlPlane.LeaderAndIsr(ctx, valid)
		release()
	}
	var all int16
	if err != nil {
		all = errorCode(&log, err)
		resp.ErrorCode = all
	}
	resp.Partitions = make([]kmsg.LeaderAndISRResponseTopicPartition, 0, len(creq.Partitions))
	for _, p := range creq.Partitions {
		rp := kmsg.NewLeaderAndISRResponseTopicPartition()
		rp.Topic, rp.Partition = p.TopicPartition.Topic, p.TopicPartition.Partition
		switch {
		case err != nil:
			rp.ErrorCode = all
		case refused[p.TopicPartition]:
			rp.ErrorCode = kerr.InvalidRequest.Code
		default:
			rp.ErrorCode = errorCode(&log, errs[p.TopicPartition])
		}
		resp.Partitions = append(resp.Partitions, rp)
	}
	return resp, nil
}

// leaderAndIsrFromKmsg decodes req; listener names the endpoints of the
// live leaders.
func leaderAndIsrFromKmsg(req *kmsg.LeaderAndISRRequest, listener string) cluster.LeaderAndIsrRequest {
	out := cluster.LeaderAndIsrRequest{
		ControllerID:    req.ControllerID,
		ControllerEpoch: req.ControllerEpoch,
		BrokerEpoch:     -1,
	}
	if req.Version >= 2 {
		out.BrokerEpoch = req.BrokerEpoch
	}
	add := func(topic string, p *kmsg.LeaderAndISRRequestTopicPartition) {
		pa := cluster.PartitionAssignment{
			TopicPartition: cluster.TopicPartition{Topic: topic, Partition: p.Partition},
			Replicas:       int32s(p.Replicas),
			LeaderAndIsr: cluster.LeaderAndIsr{
				Leader:          p.Leader,
				LeaderEpoch:     p.LeaderEpoch,
				Isr:             int32s(p.ISR),
				ControllerEpoch: p.ControllerEpoch,
				ZkVersion:       p.ZKVersion,
			},
			IsNew: req.Version >= 1 && p.IsNew,
		}
		if req.Version >= 3 {
			pa.AddingReplicas, pa.RemovingReplicas = int32s(p.AddingReplicas), int32s(p.RemovingReplicas)
		}
		out.Partitions = append(out.Partitions, pa)
	}
	n := len(req.PartitionStates)
	for _, t := range req.TopicStates {
		n += len(t.PartitionStates)
	}
	out.Partitions = make([]cluster.PartitionAssignment, 0, n)
	if req.Version < 2 {
		for i := range req.PartitionStates {
			add(req.PartitionStates[i].Topic, &req.PartitionStates[i])
		}
	} else {
		for _, t := range req.TopicStates {
			for i := range t.PartitionStates {
				add(t.Topic, &t.PartitionStates[i])
			}
		}
	}
	for _, l := range req.LiveLeaders {
		out.LiveLeaders = append(out.LiveLeaders, cluster.Broker{
			ID:        l.BrokerID,
			Endpoints: []cluster.Endpoint{{Listener: listener, SecurityProtocol: "PLAINTEXT", Host: l.Host, Port: l.Port}},
		})
	}
	return out
}

// leaderAndIsrToKmsg encodes r at version; each live leader is sent with
// its endpoint on listener, which it must have.
func leaderAndIsrToKmsg(r cluster.LeaderAndIsrRequest, version int16, listener string) (*kmsg.LeaderAndISRRequest, error) {
	req := kmsg.NewPtrLeaderAndISRRequest()
	req.Version = version
	req.ControllerID = r.ControllerID
	req.ControllerEpoch = r.ControllerEpoch
	req.BrokerEpoch = r.BrokerEpoch
	state := func(p cluster.PartitionAssignment) kmsg.LeaderAndISRRequestTopicPartition {
		kp := kmsg.NewLeaderAndISRRequestTopicPartition()
		kp.Partition = p.TopicPartition.Partition
		kp.ControllerEpoch = p.LeaderAndIsr.ControllerEpoch
		kp.Leader = p.LeaderAndIsr.Leader
		kp.LeaderEpoch = p.LeaderAndIsr.LeaderEpoch
		kp.ISR = p.LeaderAndIsr.Isr
		kp.ZKVersion = p.LeaderAndIsr.ZkVersion
		kp.Replicas = p.Replicas
		kp.IsNew = p.IsNew
		if version >= 3 {
			kp.AddingReplicas, kp.RemovingReplicas = p.AddingReplicas, p.RemovingReplicas
		}
		return kp
	}
	if version < 2 {
		for _, p := range r.Partitions {
			kp := state(p)
			kp.Topic = p.TopicPartition.Topic
			req.PartitionStates = append(req.PartitionStates, kp)
		}
	} else {
		topics, byTopic := topicOrder(r.Partitions, func(p cluster.PartitionAssignment) string { return p.TopicPartition.Topic })
		for _, t := range topics {
			kt := kmsg.NewLeaderAndISRRequestTopicState()
			kt.Topic = t
			for _, p := range byTopic[t] {
				kt.PartitionStates = append(kt.PartitionStates, state(p))
			}
			req.TopicStates = append(req.TopicStates, kt)
		}
	}
	for _, b := range r.LiveLeaders {
		e, ok := b.Endpoint(listener)
		if !ok {
			return nil, fmt.Errorf("live leader %d has no endpoint on listener %s: %w", b.ID, listener, cluster.ErrBrokerNotAvailable)
		}
		l := kmsg.NewLeaderAndISRRequestLiveLeader()
		l.BrokerID, l.Host, l.Port = b.ID, e.Host, e.Port
		req.LiveLeaders = append(req.LiveLeaders, l)
	}
	return req, nil
}
