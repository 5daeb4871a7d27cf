package protocol

// CreatePartitions (key 37), versions 0-3.
//
//   - Any broker serves it (PartitionAdmin writes the grown assignment to
//     ZooKeeper; the controller creates the new partitions). Served only
//     when Config.Admin implements PartitionAdmin.
//   - Count must grow the topic (INVALID_PARTITIONS otherwise). An explicit
//     Assignment lists the replicas of each new partition; its length and
//     replication factor are checked by PartitionAdmin
//     (INVALID_REPLICA_ASSIGNMENT). The new partitions take the topic's
//     replication factor.
//   - A topic named twice answers INVALID_REQUEST for each copy, as Kafka.
//   - Unless ValidateOnly, the response waits, as CreateTopics does, until
//     this broker's metadata shows a leader for every partition
//     (REQUEST_TIMED_OUT at TimeoutMillis; the partitions still exist).
//     TimeoutMillis <= 0 answers REQUEST_TIMED_OUT at once, as Kafka's
//     ZkAdminManager.createPartitions.
//   - ErrorMessage carries the reason for every error.
//   - Authorization: Alter on each topic, else TOPIC_AUTHORIZATION_FAILED.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/security"
)

func (s *Server) handleCreatePartitions(ctx context.Context, rc *reqContext, req *kmsg.CreatePartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	pa, _ := s.cfg.Admin.(PartitionAdmin)
	repeated := repeatedTopics(len(req.Topics), func(i int) string { return req.Topics[i].Topic })
	actx, cancel := adminTimeout(ctx, req.TimeoutMillis)
	defer cancel()

	resp.Topics = make([]kmsg.CreatePartitionsResponseTopic, 0, len(req.Topics))
	grown := map[int]int32{} // index in resp.Topics -> partitions to wait for
	alterable := s.filterAuthorized(rc, security.OpAlter, security.ResourceTopic, logDenied)
	for _, t := range req.Topics {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		fail := func(code int16, err error) {
			rt.ErrorCode, rt.ErrorMessage = code, errorMessage(err)
		}
		switch {
		case repeated[t.Topic]:
			fail(kerr.InvalidRequest.Code, errRepeatedTopic(t.Topic))
		case !alterable(t.Topic):
			fail(kerr.TopicAuthorizationFailed.Code, errTopicAuthorization)
		default:
			var assignment [][]int32
			if t.Assignment != nil {
				assignment = make([][]int32, 0, len(t.Assignment))
				for _, a := range t.Assignment {
					assignment = append(assignment, a.Replicas)
				}
			}
			if err := pa.CreatePartitions(actx, t.Topic, t.Count, assignment, req.ValidateOnly); err != nil {
				fail(s.errorCode(rc, err), err)
				break
			}
			if !req.ValidateOnly {
				requestEvent(s.log.Info(), rc).Str("topic", t.Topic).Int32("partitions", t.Count).Msg("created partitions")
				grown[len(resp.Topics)] = t.Count
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	timedOut := func(i int) {
		resp.Topics[i].ErrorCode = kerr.RequestTimedOut.Code
		msg := "the new partitions exist but have no leader yet"
		resp.Topics[i].ErrorMessage = &msg
	}
	switch {
	case len(grown) == 0:
	case req.TimeoutMillis <= 0:
		// Kafka's ZkAdminManager.createPartitions: with no time to wait,
		// a grown topic answers REQUEST_TIMED_OUT at once.
		for i := range grown {
			timedOut(i)
		}
	default:
		s.awaitLeaders(actx, func(i int) string { return resp.Topics[i].Topic }, timedOut, grown)
	}
	return resp, nil
}

// repeatedTopics returns the topics named more than once among n, the
// i-th named name(i). CreateTopics and CreatePartitions answer every copy
// of one INVALID_REQUEST (errRepeatedTopic) and act on none, as Kafka
// does.
func repeatedTopics(n int, name func(int) string) map[string]bool {
	seen := make(map[string]bool, n)
	repeated := map[string]bool{}
	for i := range n {
		t := name(i)
		if seen[t] {
			repeated[t] = true
		}
		seen[t] = true
	}
	return repeated
}

// errRepeatedTopic is the error of a topic repeatedTopics returned.
func errRepeatedTopic(topic string) error {
	return fmt.Errorf("topic %q appears more than once in the request", topic)
}

// metadataPoll is how often a wait on the metadata looks again when the
// Metadata cannot tell of its changes (no MetadataNotifier).
const metadataPoll = 20 * time.Millisecond

// awaitMetadata returns true as soon as done holds, checking it again
// after every change of the metadata (MetadataNotifier) or every
// metadataPoll, and false once ctx ends first.
func (s *Server) awaitMetadata(ctx context.Context, done func() bool) bool {
	n, _ := s.cfg.Metadata.(MetadataNotifier)
	var tick <-chan time.Time
	if n == nil {
		t := time.NewTicker(metadataPoll)
		defer t.Stop()
		tick = t.C
	}
	for {
		var changed <-chan struct{}
		if n != nil {
			changed = n.Changed() // before the check, so no change is missed
		}
		if done() {
			return true
		}
		select {
		case <-changed:
		case <-tick:
		case <-ctx.Done():
			return done()
		}
	}
}

// awaitLeaders holds a response until this broker's metadata shows at
// least want[i] partitions of topic name(i), each with a leader, for every
// i in want, or until ctx ends, when timedOut(i) marks the rest (the
// wait of awaitTopicLeaders, for any response).
func (s *Server) awaitLeaders(ctx context.Context, name func(int) string, timedOut func(int), want map[int]int32) {
	ready := func(topic string, partitions int32) bool {
		t, ok := s.cfg.Metadata.Topic(topic)
		if !ok || int32(len(t.Partitions)) < partitions {
			return false
		}
		for _, p := range t.Partitions {
			if p.State.Leader < 0 {
				return false
			}
		}
		return true
	}
	all := func() bool {
		for i, n := range want {
			if ready(name(i), n) {
				delete(want, i)
			}
		}
		return len(want) == 0
	}
	if !s.awaitMetadata(ctx, all) {
		for i := range want {
			timedOut(i)
		}
	}
}
