package protocol

// UpdateMetadata (key 6), versions 0-6, served only with
// Config.ControlPlane.
//
// The controller's view of live brokers and partition states, which fills
// this broker's metadata cache (reference §2.6, §2.7; MetadataCache).
//
//   - v0-v4 list partition states ungrouped, each naming its topic; v5+
//     group them by topic and carry BrokerEpoch. OfflineReplicas from v4.
//     v6 is flexible; v7 adds topic ids, which we do not have.
//   - Live brokers: v0 has one host:port per broker (a PLAINTEXT endpoint
//     named PLAINTEXT); v1+ a list of endpoints with a security protocol
//     id; v3+ names each endpoint's listener (before that the listener is
//     named after its security protocol, as in Kafka); v2+ a rack. Broker
//     epochs are not carried, so decoded brokers have epoch 0.
//   - Fencing as for LeaderAndIsr (admitControl): STALE_BROKER_EPOCH,
//     STALE_CONTROLLER_EPOCH.
//   - The decoded cluster.UpdateMetadataRequest goes to
//     ControlPlane.UpdateMetadata; its error becomes the response's code.
//   - Authorization: ClusterAction on the cluster (admitControl), as
//     LeaderAndIsr.
//   - Cost: linear in the partitions carried, plus the size of each topic
//     they touch (MetadataCache.Apply re-sorts those topics, in place
//     when their ids are 0..n-1); the replica, ISR and offline lists of
//     the whole request are copied into one allocation.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

func (s *Server) handleUpdateMetadata(ctx context.Context, rc *reqContext, req *kmsg.UpdateMetadataRequest) (kmsg.Response, error) {
	creq := updateMetadataFromKmsg(req)
	resp := req.ResponseKind().(*kmsg.UpdateMetadataResponse)
	log := s.log.With().Str("remote_addr", rc.remoteAddr).Int32("correlation_id", rc.correlationID).
		Int32("controller_id", creq.ControllerID).Int32("controller_epoch", creq.ControllerEpoch).Logger()

	release, err := s.admitControl(ctx, rc, creq.ControllerID, creq.ControllerEpoch, creq.BrokerEpoch, req.Version >= 5)
	if err == nil {
		err = s.cfg.ControlPlane.UpdateMetadata(ctx, creq)
		release()
	}
	resp.ErrorCode = errorCode(&log, err)
	return resp, nil
}

func updateMetadataFromKmsg(req *kmsg.UpdateMetadataRequest) cluster.UpdateMetadataRequest {
	out := cluster.UpdateMetadataRequest{
		ControllerID:    req.ControllerID,
		ControllerEpoch: req.ControllerEpoch,
		BrokerEpoch:     -1,
	}
	if req.Version >= 5 {
		out.BrokerEpoch = req.BrokerEpoch
	}
	add := func(topic string, p *kmsg.UpdateMetadataRequestTopicPartition) {
		info := cluster.TopicPartitionInfo{Topic: topic, PartitionInfo: cluster.PartitionInfo{
			Partition: p.Partition,
			Replicas:  int32s(p.Replicas),
			State: cluster.LeaderAndIsr{
				Leader:          p.Leader,
				LeaderEpoch:     p.LeaderEpoch,
				Isr:             int32s(p.ISR),
				ControllerEpoch: p.ControllerEpoch,
				ZkVersion:       p.ZKVersion,
			},
		}}
		if req.Version >= 4 {
			info.Offline = int32s(p.OfflineReplicas)
		}
		out.Partitions = append(out.Partitions, info)
	}
	n := len(req.PartitionStates)
	for _, t := range req.TopicStates {
		n += len(t.PartitionStates)
	}
	out.Partitions = make([]cluster.TopicPartitionInfo, 0, n)
	if req.Version < 5 {
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
	for _, b := range req.LiveBrokers {
		cb := cluster.Broker{ID: b.ID}
		if req.Version == 0 {
			cb.Endpoints = []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: b.Host, Port: b.Port}}
		}
		for _, e := range b.Endpoints {
			sp := securityProtocolName(e.SecurityProtocol)
			listener := sp
			if req.Version >= 3 {
				listener = e.ListenerName
			}
			cb.Endpoints = append(cb.Endpoints, cluster.Endpoint{Listener: listener, SecurityProtocol: sp, Host: e.Host, Port: e.Port})
		}
		if req.Version >= 2 && b.Rack != nil {
			rack := *b.Rack
			cb.Rack = &rack
		}
		out.LiveBrokers = append(out.LiveBrokers, cb)
	}
	return out
}

// updateMetadataToKmsg encodes r at version. v0 can carry one endpoint
// per broker: the first.
func updateMetadataToKmsg(r cluster.UpdateMetadataRequest, version int16) *kmsg.UpdateMetadataRequest {
	req := kmsg.NewPtrUpdateMetadataRequest()
	req.Version = version
	req.ControllerID = r.ControllerID
	req.ControllerEpoch = r.ControllerEpoch
	req.BrokerEpoch = r.BrokerEpoch
	state := func(p cluster.TopicPartitionInfo) kmsg.UpdateMetadataRequestTopicPartition {
		kp := kmsg.NewUpdateMetadataRequestTopicPartition()
		kp.Partition = p.Partition
		kp.ControllerEpoch = p.State.ControllerEpoch
		kp.Leader = p.State.Leader
		kp.LeaderEpoch = p.State.LeaderEpoch
		kp.ISR = p.State.Isr
		kp.ZKVersion = p.State.ZkVersion
		kp.Replicas = p.Replicas
		kp.OfflineReplicas = p.Offline
		return kp
	}
	if version < 5 {
		for _, p := range r.Partitions {
			kp := state(p)
			kp.Topic = p.Topic
			req.PartitionStates = append(req.PartitionStates, kp)
		}
	} else {
		topics, byTopic := topicOrder(r.Partitions, func(p cluster.TopicPartitionInfo) string { return p.Topic })
		for _, t := range topics {
			kt := kmsg.NewUpdateMetadataRequestTopicState()
			kt.Topic = t
			for _, p := range byTopic[t] {
				kt.PartitionStates = append(kt.PartitionStates, state(p))
			}
			req.TopicStates = append(req.TopicStates, kt)
		}
	}
	for _, b := range r.LiveBrokers {
		kb := kmsg.NewUpdateMetadataRequestLiveBroker()
		kb.ID = b.ID
		kb.Rack = b.Rack
		if version == 0 && len(b.Endpoints) > 0 {
			kb.Host, kb.Port = b.Endpoints[0].Host, b.Endpoints[0].Port
		}
		for _, e := range b.Endpoints {
			ke := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
			ke.Host, ke.Port = e.Host, e.Port
			ke.ListenerName = e.Listener
			ke.SecurityProtocol = securityProtocolID(e.SecurityProtocol)
			kb.Endpoints = append(kb.Endpoints, ke)
		}
		req.LiveBrokers = append(req.LiveBrokers, kb)
	}
	return req
}
