package chaos

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRawOutcome pins the raw writer's classification of error codes:
// fail only for Kafka's pre-append refusals, info for an answer that may
// come after the append. KAFKA_STORAGE_ERROR is info: the soak's disk-full
// run had a record answered 56 by a leader whose dir failed after the
// append (r-4-00000775), and the record was in the final log.
func TestRawOutcome(t *testing.T) {
	for _, c := range []struct {
		code, acks int16
		want       Outcome
	}{
		{kerr.KafkaStorageError.Code, -1, Info},
		{kerr.KafkaStorageError.Code, 1, Info},
		{kerr.NotEnoughReplicas.Code, -1, Fail},
		{kerr.NotEnoughReplicasAfterAppend.Code, -1, Info},
		{kerr.NotLeaderForPartition.Code, -1, Info},
		{kerr.NotLeaderForPartition.Code, 1, Fail},
		{kerr.UnknownTopicOrPartition.Code, -1, Fail},
		{kerr.LeaderNotAvailable.Code, -1, Fail},
		{kerr.FencedLeaderEpoch.Code, -1, Fail},
		{kerr.RequestTimedOut.Code, -1, Info},
	} {
		if got := rawOutcome(c.code, c.acks); got != c.want {
			t.Errorf("rawOutcome(%s, acks=%d) = %s, want %s", kerr.ErrorForCode(c.code), c.acks, got, c.want)
		}
	}
}
