package protocol

// DescribeLogDirs (key 35), versions 0-2 (v2 is flexible; v3 adds a
// top-level error code, v4 the dir's total and usable bytes).
//
//   - Served only when Config.Replicas implements LogDirs. Every log dir of
//     this broker (absolute path), each with the replicas it holds: all of
//     them when Topics is null, else those asked for (an unknown partition
//     is left out, as in Kafka). A dir with no matching replica is listed
//     with no topics.
//   - Per partition: Size in bytes of its segments, OffsetLag (Kafka's
//     max(HW - LEO, 0) of the local log: 0 on a leader) and IsFuture
//     false (replicas never move between dirs).
//   - A log dir that failed (partition.LogDirInfo.Err, an I/O error took
//     it offline) answers KAFKA_STORAGE_ERROR with no topics, as Kafka's
//     ReplicaManager.describeLogDirs does for an offline dir; the others
//     answer as usual.
//   - Authorization: Describe on the cluster, else no dirs (v0-2 carry no
//     error code).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/security"
)

func (s *Server) handleDescribeLogDirs(_ context.Context, rc *reqContext, req *kmsg.DescribeLogDirsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	log := s.log.With().Str("remote_addr", rc.remoteAddr).Int32("correlation_id", rc.correlationID).Logger()
	if !s.authorizeCluster(rc, security.OpDescribe) {
		// No dirs: v0-2 have no error code to say why (v3+ would carry
		// CLUSTER_AUTHORIZATION_FAILED).
		resp.Dirs = []kmsg.DescribeLogDirsResponseDir{}
		return resp, nil
	}
	var want map[cluster.TopicPartition]bool
	if req.Topics != nil {
		want = map[cluster.TopicPartition]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				want[cluster.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	for _, d := range s.cfg.Replicas.(LogDirs).DescribeLogDirs() {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d.Dir
		rd.Topics = []kmsg.DescribeLogDirsResponseDirTopic{}
		if d.Err != nil {
			rd.ErrorCode = errorCode(&log, d.Err)
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		for _, r := range d.Replicas {
			if want != nil && !want[r.TopicPartition] {
				continue
			}
			// Replicas come sorted by topic: a topic's partitions are adjacent.
			if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != r.TopicPartition.Topic {
				rt := kmsg.NewDescribeLogDirsResponseDirTopic()
				rt.Topic = r.TopicPartition.Topic
				rd.Topics = append(rd.Topics, rt)
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.OffsetLag, rp.IsFuture = r.TopicPartition.Partition, r.Size, r.OffsetLag, r.IsFuture
			rt := &rd.Topics[len(rd.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return resp, nil
}
