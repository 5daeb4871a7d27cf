package protocol

// CreateTopics (key 19), versions 0-7.
//
//   - Any broker serves it (in this design Admin writes to ZooKeeper from
//     whichever broker is asked); NOT_CONTROLLER comes only from Admin.
//   - NumPartitions / ReplicationFactor of -1 take num.partitions /
//     default.replication.factor from v4 (KIP-464); before v4 they are
//     INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR. With a
//     ReplicaAssignment both must be -1 (else INVALID_REQUEST, as Kafka);
//     the assignment is passed to Admin, which validates it
//     (INVALID_REPLICA_ASSIGNMENT).
//   - Configs become topic overrides; a null value is INVALID_CONFIG.
//     ValidateOnly (v1+) is passed to Admin.
//   - A topic named twice in one request answers INVALID_REQUEST for each
//     copy and is not created, as in Kafka.
//   - Per-topic errors come from Admin through the error table
//     (TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
//     INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT,
//     INVALID_CONFIG, NOT_CONTROLLER); ErrorMessage from v1.
//   - A created topic is answered once every partition has a leader in
//     the metadata this broker serves (Kafka's DelayedCreateTopics), woken
//     by the metadata's changes; still missing at timeout_ms it answers
//     REQUEST_TIMED_OUT (the topic exists). timeout_ms <= 0 answers
//     REQUEST_TIMED_OUT at once, as Kafka's AdminManager.createTopics.
//   - v5+ answers NumPartitions, ReplicationFactor and Configs (from
//     Admin.TopicConfig; ConfigErrorCode if that fails, e.g. after a
//     ValidateOnly request). Topic ids (v7) are zero.
//   - Authorization: Create on the cluster (asked quietly) or on each topic,
//     else TOPIC_AUTHORIZATION_FAILED; a created topic's configs (v5+) only
//     with DescribeConfigs on it, else ConfigErrorCode
//     TOPIC_AUTHORIZATION_FAILED.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleCreateTopics(ctx context.Context, rc *reqContext, req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	repeated := repeatedTopics(len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	actx, cancel := adminTimeout(ctx, req.TimeoutMillis)
	defer cancel()

	resp.Topics = make([]kmsg.CreateTopicsResponseTopic, 0, len(req.Topics))
	created := map[int]int32{} // index in resp.Topics -> partitions to wait for
	// Create on the cluster (asked quietly) covers every topic; else
	// Create on each. The configs of a created topic are returned only
	// with DescribeConfigs on it.
	clusterCreate := s.authorizeLog(rc, security.OpCreate, security.ResourceCluster, security.ClusterResourceName, quiet)
	creatable := s.filterAuthorized(rc, security.OpCreate, security.ResourceTopic, logDenied)
	configsVisible := s.filterAuthorized(rc, security.OpDescribeConfigs, security.ResourceTopic, quiet)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		fail := func(code int16, err error) {
			rt.ErrorCode = code
			if req.Version >= 1 {
				rt.ErrorMessage = errorMessage(err)
			}
		}
		ct, code, err := s.createTopicRequest(req, t)
		switch {
		case repeated[t.Topic]:
			fail(kerr.InvalidRequest.Code, errRepeatedTopic(t.Topic))
		case !clusterCreate && !creatable(t.Topic):
			fail(kerr.TopicAuthorizationFailed.Code, errTopicAuthorization)
		case code != 0:
			fail(code, err)
		default:
			if err := s.cfg.Admin.CreateTopic(actx, ct); err != nil {
				fail(s.errorCode(rc, err), err)
				break
			}
			if !req.ValidateOnly {
				requestEvent(s.log.Info(), rc).Str("topic", t.Topic).Msg("created topic")
				n := ct.NumPartitions
				if ct.Assignment != nil {
					n = int32(len(ct.Assignment))
				}
				created[len(resp.Topics)] = n
			}
			if req.Version >= 5 {
				rt.NumPartitions, rt.ReplicationFactor = ct.NumPartitions, ct.ReplicationFactor
				if ct.Assignment != nil {
					rt.NumPartitions = int32(len(ct.Assignment))
					for _, r := range ct.Assignment {
						rt.ReplicationFactor = int16(len(r))
						break
					}
				}
				if configsVisible(t.Topic) {
					s.createdTopicConfigs(&rt)
				} else {
					rt.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
				}
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	switch {
	case len(created) == 0:
	case req.TimeoutMillis <= 0:
		// Kafka's AdminManager.createTopics: with no time to wait, a
		// created topic answers REQUEST_TIMED_OUT at once (it exists, but
		// its leaders are not known to be in the metadata yet).
		for i := range created {
			resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code
		}
	default:
		s.awaitTopicLeaders(actx, resp, created)
	}
	return resp, nil
}

// awaitTopicLeaders holds the response until the metadata this broker
// serves shows a leader for every partition of the created topics, as
// Kafka's DelayedCreatePartitions does: a client that produces right after
// CreateTopics returns must find the topic. The controller creates the
// partition states and sends UpdateMetadata asynchronously, so without the
// wait the topic would look unknown for a moment. Topics not ready by the
// request's timeout answer REQUEST_TIMED_OUT (the topic still exists).
func (s *Server) awaitTopicLeaders(ctx context.Context, resp *kmsg.CreateTopicsResponse, created map[int]int32) {
	s.awaitLeaders(ctx,
		func(i int) string { return resp.Topics[i].Topic },
		func(i int) { resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code },
		created)
}

// createTopicRequest turns one request topic into an Admin request with
// the broker defaults applied, or an error code for what the protocol
// layer itself refuses.
func (s *Server) createTopicRequest(req *kmsg.CreateTopicsRequest, t kmsg.CreateTopicsRequestTopic) (CreateTopicRequest, int16, error) {
	ct := CreateTopicRequest{
		Name:              t.Topic,
		NumPartitions:     t.NumPartitions,
		ReplicationFactor: t.ReplicationFactor,
		ValidateOnly:      req.ValidateOnly,
	}
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return ct, kerr.InvalidRequest.Code, fmt.Errorf("both numPartitions or replicationFactor and replicasAssignments were set; both cannot be used at the same time")
		}
		ct.Assignment = make(map[int32][]int32, len(t.ReplicaAssignment))
		for _, a := range t.ReplicaAssignment {
			if _, dup := ct.Assignment[a.Partition]; dup {
				return ct, kerr.InvalidReplicaAssignment.Code, fmt.Errorf("partition %d is assigned twice", a.Partition)
			}
			ct.Assignment[a.Partition] = a.Replicas
		}
	} else {
		if t.NumPartitions == -1 && req.Version >= 4 {
			ct.NumPartitions = s.cfg.DefaultPartitions
		}
		if t.ReplicationFactor == -1 && req.Version >= 4 {
			ct.ReplicationFactor = s.cfg.DefaultReplicationFactor
		}
		if ct.NumPartitions <= 0 {
			return ct, kerr.InvalidPartitions.Code, fmt.Errorf("number of partitions must be larger than 0, got %d", t.NumPartitions)
		}
		if ct.ReplicationFactor <= 0 {
			return ct, kerr.InvalidReplicationFactor.Code, fmt.Errorf("replication factor must be larger than 0, got %d", t.ReplicationFactor)
		}
	}
	if len(t.Configs) > 0 {
		ct.Configs = make(map[string]string, len(t.Configs))
		for _, c := range t.Configs {
			if c.Value == nil {
				return ct, kerr.InvalidConfig.Code, fmt.Errorf("null value for topic config %q", c.Name)
			}
			ct.Configs[c.Name] = *c.Value
		}
	}
	return ct, 0, nil
}

// createdTopicConfigs fills the v5+ Configs of a created topic.
func (s *Server) createdTopicConfigs(rt *kmsg.CreateTopicsResponseTopic) {
	entries, err := s.cfg.Admin.TopicConfig(rt.Topic)
	if err != nil {
		if ke := lookupCode(err); ke != nil {
			rt.ConfigErrorCode = ke.Code
		} else {
			rt.ConfigErrorCode = kerr.UnknownServerError.Code
		}
		return
	}
	rt.Configs = make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(entries))
	for _, e := range entries {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = e.Name
		v := e.Value
		c.Value = &v
		c.Source = int8(e.Source)
		rt.Configs = append(rt.Configs, c)
	}
}
