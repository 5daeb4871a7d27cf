package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadataCreatesInternalTopicsAsTheirCoordinators: a Metadata request
// that names __transaction_state or __consumer_offsets before it exists
// creates it as its coordinator does (its partition count and compacted),
// never as an ordinary topic with num.partitions, which would leave most
// transactional and group ids on partitions that do not exist.
func TestMetadataCreatesInternalTopicsAsTheirCoordinators(t *testing.T) {
	b := startBroker(t)
	c := b.dial(t)
	for _, tc := range []struct {
		topic      string
		partitions int
	}{
		{transactionTopic, testTxnPartitions},
		{offsetsTopic, int(testOffsetsPartitions)},
	} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 7
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tc.topic)
		req.Topics = append(req.Topics, rt)
		c.roundTrip(req)
		info, ok := b.cluster.Topic(tc.topic)
		if !ok {
			t.Fatalf("%s not created", tc.topic)
		}
		if len(info.Partitions) != tc.partitions || info.Config["cleanup.policy"] != "compact" {
			t.Errorf("%s created with %d partitions and configs %v, want %d partitions, compacted",
				tc.topic, len(info.Partitions), info.Config, tc.partitions)
		}
	}
}
