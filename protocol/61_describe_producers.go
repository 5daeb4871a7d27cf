package protocol

// DescribeProducers (key 61), version 0, the whole range (Replicas
// implements TxnPartitions).
//
//   - Each partition asked for lists the active producers of its replica
//     led here (TxnPartitions.DescribeProducers): producer id and epoch,
//     last sequence and timestamp, the last coordinator epoch seen (-1 for
//     none) and the first offset of its ongoing transaction (-1 for none),
//     which is how kafka-transactions.sh finds hanging transactions.
//   - A topic name Kafka would refuse answers INVALID_TOPIC_EXCEPTION on
//     every partition, a topic the metadata does not know
//     UNKNOWN_TOPIC_OR_PARTITION; a partition not led here answers
//     NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION if the metadata
//     does not know it). Failed partitions carry an ErrorMessage.
//   - Authorization: Read on each topic, else TOPIC_AUTHORIZATION_FAILED for
//     its partitions.

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleDescribeProducers(ctx context.Context, rc *reqContext, req *kmsg.DescribeProducersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	tpr := s.cfg.Replicas.(TxnPartitions) // the key is served only then
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		var (
			topicCode int16
			topicMsg  string
		)
		if err := validTopicName(t.Topic); err != nil {
			topicCode, topicMsg = kerr.InvalidTopicException.Code, err.Error()
		} else if !s.authorize(rc, security.OpRead, security.ResourceTopic, t.Topic) {
			topicCode, topicMsg = kerr.TopicAuthorizationFailed.Code, kerr.TopicAuthorizationFailed.Message
		} else if exists, _ := s.hasPartition(cluster.TopicPartition{Topic: t.Topic}); !exists {
			topicCode, topicMsg = kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Message
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			if topicCode != 0 {
				rp.ErrorCode, rp.ErrorMessage = topicCode, kmsg.StringPtr(topicMsg)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			tp := cluster.TopicPartition{Topic: t.Topic, Partition: p}
			producers, err := tpr.DescribeProducers(tp)
			if err != nil {
				rp.ErrorCode = s.partitionErrorCode(ctx, rc, tp, err, s.errorCode, nil)
				rp.ErrorMessage = errorMessage(err)
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.ActiveProducers = make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, 0, len(producers))
			for _, pi := range producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.ProducerEpoch)
				ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// maxTopicNameLength is Kafka's Topic.MAX_NAME_LENGTH.
const maxTopicNameLength = 249

// validTopicName is Kafka's Topic.validate: a name that can never exist
// is refused before any lookup.
func validTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is illegal, it can't be empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name cannot be \".\" or \"..\"")
	case len(name) > maxTopicNameLength:
		return fmt.Errorf("topic name is illegal, it can't be longer than %d characters, topic name: %s", maxTopicNameLength, name)
	case strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "":
		return fmt.Errorf("topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name)
	}
	return nil
}
