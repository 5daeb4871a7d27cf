package protocol

// ElectLeaders (key 43), versions 0-2 (KIP-183, KIP-460). Served only when
// Config.Admin implements ClusterControl.
//
//   - v0 is a preferred election; v1 adds ElectionType (0 preferred, 1
//     unclean) and the top-level error code; v2 is flexible. Another
//     election type answers INVALID_REQUEST.
//   - The controller's: another broker answers NOT_CONTROLLER for the
//     request and each named partition, as Kafka's KafkaApis does.
//   - Null topics elects for every partition, and the answer leaves out
//     the partitions whose election was not needed (as Kafka's KafkaApis);
//     with a top-level error, v0 (which cannot carry it) answers it for
//     each partition of the metadata. Per partition: ELECTION_NOT_
//     NEEDED (preferred: the preferred replica leads; unclean: the leader is
//     alive), PREFERRED_LEADER_NOT_AVAILABLE (preferred replica not alive
//     or not in the ISR), ELIGIBLE_LEADERS_NOT_AVAILABLE (unclean: no live
//     replica), UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (topic
//     being deleted), with messages.
//   - The answer comes once the controller wrote and announced the new
//     leaders; unlike Kafka it does not wait (up to TimeoutMillis) for
//     this broker's metadata to show them.
//   - Authorization: Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//     at the top and for each partition asked for.

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleElectLeaders(ctx context.Context, rc *reqContext, req *kmsg.ElectLeadersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	cc := s.cfg.Admin.(ClusterControl)
	typ := cluster.ElectPreferred
	if req.Version >= 1 {
		typ = cluster.ElectionType(req.ElectionType)
	}
	var tps []cluster.TopicPartition
	if req.Topics != nil {
		tps = []cluster.TopicPartition{}
		seen := map[cluster.TopicPartition]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tp := cluster.TopicPartition{Topic: t.Topic, Partition: p}
				if !seen[tp] {
					seen[tp] = true
					tps = append(tps, tp)
				}
			}
		}
	}
	var (
		res map[cluster.TopicPartition]error
		err error
		all int16
	)
	if !s.authorizeCluster(rc, security.OpAlter) {
		all = kerr.ClusterAuthorizationFailed.Code
	} else if typ != cluster.ElectPreferred && typ != cluster.ElectUnclean {
		all = kerr.InvalidRequest.Code
	} else if res, err = cc.ElectLeaders(ctx, typ, tps); err != nil {
		all = s.errorCode(rc, err)
	}
	if all != 0 {
		resp.ErrorCode = all
		if tps == nil {
			// A refused request for all partitions lists none, as Kafka's.
			if req.Version > 0 || all == kerr.ClusterAuthorizationFailed.Code {
				return resp, nil
			}
			// v0 has no top-level error: as Kafka's KafkaApis (which
			// expands null topics to every partition of its metadata
			// cache first), each partition carries it.
			tps = []cluster.TopicPartition{}
			for _, ti := range s.cfg.Metadata.Topics() {
				for _, pi := range ti.Partitions {
					tps = append(tps, cluster.TopicPartition{Topic: ti.Name, Partition: pi.Partition})
				}
			}
			sortTPs(tps)
		}
	}
	order := tps
	if order == nil {
		order = make([]cluster.TopicPartition, 0, len(res))
		for tp := range res {
			order = append(order, tp)
		}
		sortTPs(order)
	}
	topics, byTopic := topicOrder(order, func(tp cluster.TopicPartition) string { return tp.Topic })
	for _, t := range topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = t
		for _, tp := range byTopic[t] {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = tp.Partition
			switch e := res[tp]; {
			case all != 0:
				rp.ErrorCode = all
			case e != nil:
				rp.ErrorCode, rp.ErrorMessage = s.errorCode(rc, e), errorMessage(e)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// sortTPs sorts tps by topic, then partition.
func sortTPs(tps []cluster.TopicPartition) {
	slices.SortFunc(tps, func(a, b cluster.TopicPartition) int {
		if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return cmp.Compare(a.Partition, b.Partition)
	})
}
