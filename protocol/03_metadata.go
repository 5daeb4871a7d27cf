package protocol

// Metadata (key 3), versions 0-9 (v10+ returns topic ids, which this
// broker does not have).
//
//   - Brokers: every live broker with its endpoint for the listener the
//     request arrived on, falling back to the broker's first endpoint;
//     brokers with no endpoint at all are left out. Rack from v1.
//   - ClusterID from v2, ControllerID from v1 (admin clients send
//     CreateTopics there, so it must name a live broker).
//   - Topics: all of them when the list is null, or empty at v0; else the
//     ones asked for, in request order.
//   - Partitions: leader, replicas and ISR; LeaderEpoch from v7,
//     OfflineReplicas from v5. A leader of -1, or one not among the live
//     brokers, answers LEADER_NOT_AVAILABLE with leader -1. At v0 only,
//     replicas and ISR list live brokers and a missing one answers
//     REPLICA_NOT_AVAILABLE, as Kafka does; later versions list all.
//   - Unknown topics: with auto.create.topics.enable and (v < 4 or
//     AllowAutoTopicCreation), created through Admin with num.partitions
//     and default.replication.factor, then answered with the topic if the
//     metadata already shows it, else LEADER_NOT_AVAILABLE so the client
//     retries (also when it already existed: a concurrent creation).
//     Creation errors answer their code (e.g. INVALID_REPLICATION_FACTOR,
//     INVALID_TOPIC_EXCEPTION). Otherwise UNKNOWN_TOPIC_OR_PARTITION.
//   - Authorization (Config.Authorizer): all topics lists only those the
//     principal may Describe; a requested topic it may not Describe
//     answers TOPIC_AUTHORIZATION_FAILED without saying whether it exists;
//     auto-creation needs Create on the cluster or the topic, else
//     TOPIC_AUTHORIZATION_FAILED. v8+ authorized operations are filled when
//     asked (IncludeClusterAuthorizedOperations v8-10: 0 without Describe
//     on the cluster), else left at Kafka's "not requested" default.
//   - Topic ids are all zero.
//   - Cost: a request naming topics costs what those topics hold, not
//     what the cluster holds (MetadataCache.Topic copies one topic out in
//     two allocations, sorting nothing); only the all-topics form walks
//     every topic.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleMetadata(ctx context.Context, rc *reqContext, req *kmsg.MetadataRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	live := make(map[int32]bool)
	for _, b := range s.cfg.Metadata.Brokers() {
		live[b.ID] = true
		ep, ok := clientEndpoint(b, rc.listener)
		if !ok {
			continue
		}
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID = b.ID
		rb.Host = ep.Host
		rb.Port = ep.Port
		rb.Rack = b.Rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	if req.Version >= 2 {
		id := s.cfg.Metadata.ClusterID()
		resp.ClusterID = &id
	}
	resp.ControllerID = s.cfg.Metadata.ControllerID()

	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if s.authorizeCluster(rc, security.OpDescribe) {
			resp.AuthorizedOperations = s.authorizedOperations(rc, security.ResourceCluster, security.ClusterResourceName)
		}
	}
	// withOps sets a described topic's authorized operations when asked.
	withOps := func(rt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		if req.Version >= 8 && req.IncludeTopicAuthorizedOperations && rt.Topic != nil {
			rt.AuthorizedOperations = s.authorizedOperations(rc, security.ResourceTopic, *rt.Topic)
		}
		return rt
	}

	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		// All topics: those the principal may not describe are left out,
		// and their denials not logged, as Kafka's.
		describable := s.filterAuthorized(rc, security.OpDescribe, security.ResourceTopic, quiet)
		for _, info := range s.cfg.Metadata.Topics() {
			if describable(info.Name) {
				resp.Topics = append(resp.Topics, withOps(metadataTopic(req.Version, info, live)))
			}
		}
		return resp, nil
	}
	allowCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	describable := s.filterAuthorized(rc, security.OpDescribe, security.ResourceTopic, logDenied)
	creatable := func(topic string) bool { return s.mayCreateTopic(rc, topic) }
	for _, t := range req.Topics {
		if t.Topic == nil {
			// Only a topic-id request (v10+) has a null name.
			rt := kmsg.NewMetadataResponseTopic()
			rt.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		name := *t.Topic
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = &name
		rt.Partitions = []kmsg.MetadataResponseTopicPartition{}
		if !describable(name) {
			// Whether it exists is not disclosed.
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if info, ok := s.cfg.Metadata.Topic(name); ok {
			resp.Topics = append(resp.Topics, withOps(metadataTopic(req.Version, info, live)))
			continue
		}
		if allowCreate && !creatable(name) {
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if !allowCreate {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		err := s.autoCreateMetadataTopic(ctx, rc, name)
		switch {
		case errors.Is(err, errInternalTopicNotCreated):
			rt.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case err == nil || errors.Is(err, cluster.ErrTopicExists):
			if info, ok := s.cfg.Metadata.Topic(name); ok && len(info.Partitions) > 0 {
				resp.Topics = append(resp.Topics, withOps(metadataTopic(req.Version, info, live)))
				continue
			}
			// Created but not yet in this broker's metadata: the client
			// retries, as after any leader election.
			rt.ErrorCode = kerr.LeaderNotAvailable.Code
		default:
			rt.ErrorCode = s.errorCode(rc, err)
		}
		resp.Topics = append(resp.Topics, withOps(rt))
	}
	return resp, nil
}

func metadataTopic(version int16, info cluster.TopicInfo, live map[int32]bool) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	name := info.Name
	rt.Topic = &name
	rt.IsInternal = info.Internal
	rt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, len(info.Partitions))
	for _, p := range info.Partitions {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition = p.Partition
		rp.Leader = p.State.Leader
		rp.LeaderEpoch = p.State.LeaderEpoch
		rp.Replicas = nonNil(p.Replicas)
		rp.ISR = nonNil(p.State.Isr)
		rp.OfflineReplicas = nonNil(p.Offline)
		if version == 0 {
			var missing bool
			rp.Replicas, missing = liveOnly(p.Replicas, live)
			var missingIsr bool
			rp.ISR, missingIsr = liveOnly(p.State.Isr, live)
			if missing || missingIsr {
				rp.ErrorCode = kerr.ReplicaNotAvailable.Code
			}
		}
		if rp.Leader == cluster.NoLeader || !live[rp.Leader] {
			rp.Leader = cluster.NoLeader
			rp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func liveOnly(ids []int32, live map[int32]bool) ([]int32, bool) {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if live[id] {
			out = append(out, id)
		}
	}
	return out, len(out) != len(ids)
}

// errInternalTopicNotCreated marks an internal topic Metadata could not
// create (too few brokers alive for its replication factor, or no
// coordinator configured for it): COORDINATOR_NOT_AVAILABLE, as Kafka
// answers it.
var errInternalTopicNotCreated = errors.New("protocol: internal topic not created")

// autoCreateMetadataTopic creates a topic a Metadata request names. The
// internal topics are created only as their coordinators create them
// (Kafka's AutoTopicCreationManager.createInternalTopic), never as an
// ordinary topic with num.partitions and no compaction, which would leave
// most group or transactional ids on partitions that do not exist.
func (s *Server) autoCreateMetadataTopic(ctx context.Context, rc *reqContext, name string) error {
	var err error
	switch name {
	case offsetsTopic:
		if s.cfg.Groups == nil {
			return fmt.Errorf("%w: %s: no group coordinator", errInternalTopicNotCreated, name)
		}
		err = s.createOffsetsTopic(ctx, rc)
	case transactionTopic:
		if s.cfg.Transactions == nil {
			return fmt.Errorf("%w: %s: no transaction coordinator", errInternalTopicNotCreated, name)
		}
		err = s.createTransactionTopic(ctx, rc)
	default:
		return s.autoCreateTopic(ctx, name)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errInternalTopicNotCreated, name, err)
	}
	return nil
}
