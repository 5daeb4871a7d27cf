package protocol

// AlterPartitionReassignments (key 45), version 0, and
// ListPartitionReassignments (key 46), version 0 (KIP-455). Served only
// when Config.Admin implements ClusterControl.
//
//   - Both are the controller's: another broker answers the top-level
//     NOT_CONTROLLER with no topics, as Kafka's does (clients send them to
//     the controller).
//   - Alter: a partition with null replicas cancels its reassignment
//     (NO_REASSIGNMENT_IN_PROGRESS if none runs); an empty list, duplicate
//     or negative ids, or a new replica on a broker that is not alive is
//     INVALID_REPLICA_ASSIGNMENT; an unknown partition (or one of a topic
//     being deleted) UNKNOWN_TOPIC_OR_PARTITION. A partition named twice
//     takes its last entry, as Kafka's map does, and is answered once.
//     Every error carries its message. The answer comes once each
//     reassignment started (its topic znode written), not when it ends;
//     one whose znode write is still failing when TimeoutMillis is up is
//     REQUEST_TIMED_OUT (and not started).
//   - List: null topics lists every reassignment in progress; otherwise
//     the named partitions that are being reassigned (the others are left
//     out, as Kafka does), each with Replicas (the whole set while it
//     runs), AddingReplicas and RemovingReplicas.
//   - TimeoutMillis bounds the wait for the topic znode writes (the
//     context's deadline); it does not wait for the reassignment to end.
//   - Authorization: AlterPartitionReassignments needs Alter on the cluster,
//     ListPartitionReassignments Describe (CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleAlterPartitionReassignments(ctx context.Context, rc *reqContext, req *kmsg.AlterPartitionAssignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	cc := s.cfg.Admin.(ClusterControl)
	if !s.authorizeCluster(rc, security.OpAlter) {
		// Every partition carries the refusal, as Kafka's getErrorResponse.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, t := range req.Topics {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.ClusterAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	reqs := map[cluster.TopicPartition][]int32{}
	var order []cluster.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if _, seen := reqs[tp]; !seen {
				order = append(order, tp)
			}
			if p.Replicas == nil {
				reqs[tp] = nil
			} else {
				reqs[tp] = slices.Clone(p.Replicas)
			}
		}
	}
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	res, err := cc.AlterPartitionReassignments(ctx, reqs)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorCode(rc, err), errorMessage(err)
		return resp, nil
	}
	topics, byTopic := topicOrder(order, func(tp cluster.TopicPartition) string { return tp.Topic })
	for _, t := range topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t
		for _, tp := range byTopic[t] {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = tp.Partition
			if e := res[tp]; e != nil {
				rp.ErrorCode, rp.ErrorMessage = s.errorCode(rc, e), errorMessage(e)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (s *Server) handleListPartitionReassignments(ctx context.Context, rc *reqContext, req *kmsg.ListPartitionReassignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	cc := s.cfg.Admin.(ClusterControl)
	if !s.authorizeCluster(rc, security.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	var tps []cluster.TopicPartition
	if req.Topics != nil {
		tps = []cluster.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, cluster.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	list, err := cc.ListPartitionReassignments(ctx, tps)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorCode(rc, err), errorMessage(err)
		return resp, nil
	}
	topics, byTopic := topicOrder(list, func(r cluster.PartitionReassignment) string { return r.TopicPartition.Topic })
	for _, t := range topics {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = t
		for _, r := range byTopic[t] {
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = r.TopicPartition.Partition
			rp.Replicas = nonNil(r.Replicas)
			rp.AddingReplicas = nonNil(r.AddingReplicas)
			rp.RemovingReplicas = nonNil(r.RemovingReplicas)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
