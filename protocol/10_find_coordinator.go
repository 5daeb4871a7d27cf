package protocol

// FindCoordinator (key 10), versions 0-4.
//
//   - Key type 0 (group, the only type before v1): the coordinator is the
//     leader of partition Groups.PartitionFor(key) of __consumer_offsets,
//     from the metadata cache, answered with its endpoint for the listener
//     the request came in on. No leader, or a leader that is not a live
//     broker, answers COORDINATOR_NOT_AVAILABLE (the client retries).
//   - __consumer_offsets is created on first use, as Kafka does, with
//     offsets.topic.num.partitions partitions and replication factor
//     offsets.topic.replication.factor; while fewer brokers are alive than
//     that it is not created and the answer is COORDINATOR_NOT_AVAILABLE.
//     Its configs are Kafka's GroupCoordinator.offsetsTopicConfigs:
//     cleanup.policy=compact, segment.bytes = offsets.topic.segment.bytes
//     and compression.type=producer (the coordinator's batches keep their
//     compression, offsets.topic.compression.codec). Compaction keeps the
//     topic bounded by the live groups and offsets, since the coordinator
//     writes tombstones for deleted groups and expired offsets.
//   - Key type 1 (transactional id, with Config.Transactions): the leader
//     of partition Transactions.PartitionFor(key) of __transaction_state,
//     created on first use like __consumer_offsets with
//     transaction.state.log.num.partitions and .replication.factor and
//     Kafka's TransactionStateManager.transactionTopicConfigs:
//     cleanup.policy=compact, min.insync.replicas =
//     transaction.state.log.min.isr, segment.bytes =
//     transaction.state.log.segment.bytes,
//     unclean.leader.election.enable=false, and compression.type=producer
//     where Kafka sets uncompressed: this broker's topic configs take only
//     producer (it never recompresses), and the coordinator's batches are
//     uncompressed, so the stored bytes are the same. Without Config.Transactions key type
//     1 answers INVALID_REQUEST with a message: there is no transaction
//     coordinator, and an error a client does not retry is more honest
//     than COORDINATOR_NOT_AVAILABLE forever. Key type 0 without
//     Config.Groups answers the same way. Other types are
//     INVALID_REQUEST as in Kafka.
//   - v4+ batches keys (CoordinatorKeys in, Coordinators out), each with
//     its own error; before v4 the one key's answer is the top level.
//     ErrorMessage from v1.
//   - Authorization: Describe on the group (GROUP_AUTHORIZATION_FAILED) or
//     on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
//     before any internal topic is created.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/security"
	"github.com/kafkazk/broker/txn"
)

// offsetsTopic is the internal topic of the group coordinator.
const offsetsTopic = group.Topic

// transactionTopic is the internal topic of the transaction coordinator.
const transactionTopic = txn.Topic

type coordinatorAnswer struct {
	nodeID int32
	host   string
	port   int32
	code   int16
	msg    string
}

func (s *Server) handleFindCoordinator(ctx context.Context, rc *reqContext, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		a := s.findCoordinator(ctx, rc, req.CoordinatorType, key)
		if req.Version < 4 {
			resp.NodeID, resp.Host, resp.Port, resp.ErrorCode = a.nodeID, a.host, a.port, a.code
			if req.Version >= 1 && a.msg != "" {
				m := a.msg
				resp.ErrorMessage = &m
			}
			continue
		}
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port, c.ErrorCode = key, a.nodeID, a.host, a.port, a.code
		if a.msg != "" {
			m := a.msg
			c.ErrorMessage = &m
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}

func (s *Server) findCoordinator(ctx context.Context, rc *reqContext, keyType int8, key string) coordinatorAnswer {
	fail := func(code int16, msg string) coordinatorAnswer {
		return coordinatorAnswer{nodeID: -1, host: "", port: -1, code: code, msg: msg}
	}
	var (
		topic  string
		p      int32
		create func(context.Context, *reqContext) error
	)
	switch {
	case keyType == 0 && !s.authorize(rc, security.OpDescribe, security.ResourceGroup, key):
		return fail(kerr.GroupAuthorizationFailed.Code, "")
	case keyType == 1 && !s.authorize(rc, security.OpDescribe, security.ResourceTransactionalID, key):
		return fail(kerr.TransactionalIDAuthorizationFailed.Code, "")
	case keyType == 0 && s.cfg.Groups != nil:
		topic, p, create = offsetsTopic, s.cfg.Groups.PartitionFor(key), s.createOffsetsTopic
	case keyType == 0:
		return fail(kerr.InvalidRequest.Code, "consumer groups are not supported by this broker")
	case keyType == 1 && s.cfg.Transactions != nil:
		topic, p, create = transactionTopic, s.cfg.Transactions.PartitionFor(key), s.createTransactionTopic
	case keyType == 1:
		return fail(kerr.InvalidRequest.Code, "transactions are not supported by this broker")
	default:
		return fail(kerr.InvalidRequest.Code, fmt.Sprintf("unknown coordinator type %d", keyType))
	}
	info, ok := s.cfg.Metadata.Topic(topic)
	if !ok {
		if err := create(ctx, rc); err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code, err.Error())
		}
		if info, ok = s.cfg.Metadata.Topic(topic); !ok {
			return fail(kerr.CoordinatorNotAvailable.Code, "")
		}
	}
	leader := cluster.NoLeader
	for _, pi := range info.Partitions {
		if pi.Partition == p {
			leader = pi.State.Leader
		}
	}
	if leader == cluster.NoLeader {
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	for _, b := range s.cfg.Metadata.Brokers() {
		if b.ID != leader {
			continue
		}
		ep, ok := clientEndpoint(b, rc.listener)
		if !ok {
			break
		}
		return coordinatorAnswer{nodeID: b.ID, host: ep.Host, port: ep.Port}
	}
	return fail(kerr.CoordinatorNotAvailable.Code, "")
}

// createOffsetsTopic creates __consumer_offsets, or says why not. A nil
// error means it was created (or already existed) but the metadata does
// not show it yet; the client retries either way.
func (s *Server) createOffsetsTopic(ctx context.Context, rc *reqContext) error {
	ot := s.cfg.OffsetsTopic
	if alive := len(s.cfg.Metadata.Brokers()); alive < int(ot.ReplicationFactor) {
		return fmt.Errorf("number of alive brokers %d does not meet the required replication factor %d for the offsets topic (offsets.topic.replication.factor)",
			alive, ot.ReplicationFactor)
	}
	actx, cancel := adminTimeout(ctx, 0)
	defer cancel()
	err := s.cfg.Admin.CreateTopic(actx, CreateTopicRequest{
		Name: offsetsTopic, NumPartitions: ot.Partitions, ReplicationFactor: ot.ReplicationFactor,
		Configs: offsetsTopicConfigs(ot.SegmentBytes),
	})
	switch {
	case err == nil:
		s.log.Info().Str("topic", offsetsTopic).Int32("partitions", ot.Partitions).
			Int16("replication_factor", ot.ReplicationFactor).Str("remote_addr", rc.remoteAddr).Msg("created the offsets topic")
		return nil
	case errors.Is(err, cluster.ErrTopicExists):
		return nil
	}
	s.log.Warn().Err(err).Str("topic", offsetsTopic).Msg("creating the offsets topic failed")
	return err
}

// createTransactionTopic creates __transaction_state, or says why not,
// as createOffsetsTopic.
func (s *Server) createTransactionTopic(ctx context.Context, rc *reqContext) error {
	tt := s.cfg.TransactionTopic
	if alive := len(s.cfg.Metadata.Brokers()); alive < int(tt.ReplicationFactor) {
		return fmt.Errorf("number of alive brokers %d does not meet the required replication factor %d for the transactions state topic (transaction.state.log.replication.factor)",
			alive, tt.ReplicationFactor)
	}
	actx, cancel := adminTimeout(ctx, 0)
	defer cancel()
	err := s.cfg.Admin.CreateTopic(actx, CreateTopicRequest{
		Name: transactionTopic, NumPartitions: tt.Partitions, ReplicationFactor: tt.ReplicationFactor,
		Configs: transactionTopicConfigs(tt),
	})
	switch {
	case err == nil:
		s.log.Info().Str("topic", transactionTopic).Int32("partitions", tt.Partitions).
			Int16("replication_factor", tt.ReplicationFactor).Str("remote_addr", rc.remoteAddr).Msg("created the transaction state topic")
		return nil
	case errors.Is(err, cluster.ErrTopicExists):
		return nil
	}
	s.log.Warn().Err(err).Str("topic", transactionTopic).Msg("creating the transaction state topic failed")
	return err
}

// transactionTopicConfigs are the configs __transaction_state is created
// with, as Kafka's TransactionStateManager.transactionTopicConfigs:
// compacted (the coordinator rewrites each id's state) and never elected
// uncleanly (a lost state write could reopen a completed transaction).
// Kafka's compression.type=uncompressed is producer here (see the file
// comment).
func transactionTopicConfigs(tt TransactionTopicConfig) map[string]string {
	return map[string]string{
		"cleanup.policy":                 "compact",
		"min.insync.replicas":            strconv.FormatInt(int64(tt.MinISR), 10),
		"segment.bytes":                  strconv.FormatInt(tt.SegmentBytes, 10),
		"unclean.leader.election.enable": "false",
		"compression.type":               "producer",
	}
}

// offsetsTopicConfigs are the configs __consumer_offsets is created with,
// as Kafka's GroupCoordinator.offsetsTopicConfigs: compacted, so the log
// cleaner keeps only the last commit per key and removes tombstones.
func offsetsTopicConfigs(segmentBytes int64) map[string]string {
	return map[string]string{
		"cleanup.policy":   "compact",
		"segment.bytes":    strconv.FormatInt(segmentBytes, 10),
		"compression.type": "producer",
	}
}

// clientEndpoint is where a client on listener reaches broker b: its
// endpoint on that listener, else its first one; false if it has none.
func clientEndpoint(b cluster.Broker, listener string) (cluster.Endpoint, bool) {
	if ep, ok := b.Endpoint(listener); ok {
		return ep, true
	}
	if len(b.Endpoints) == 0 {
		return cluster.Endpoint{}, false
	}
	return b.Endpoints[0], true
}
