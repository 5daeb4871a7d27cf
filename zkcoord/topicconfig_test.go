package zkcoord

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafkazk/broker/cluster"
)

// TestValidateTopicConfigOnBrokerDefaults: overrides are checked on top
// of the broker's topic defaults, as Kafka's AdminZkClient merges
// KafkaConfig.extractLogConfigMap before LogConfig.validate: a
// min.compaction.lag.ms above the broker's log.cleaner.max.compaction.lag.ms
// is refused, naming the key, though it is valid against Kafka's defaults.
func TestValidateTopicConfigOnBrokerDefaults(t *testing.T) {
	defaults := cluster.DefaultLogConfig()
	defaults.MaxCompactionLagMs = 10
	s := &Session{cfg: Config{TopicDefaults: &defaults}}
	err := s.validateTopicConfig("t", map[string]string{"min.compaction.lag.ms": "100"})
	if !errors.Is(err, cluster.ErrInvalidConfig) || !strings.Contains(err.Error(), "min.compaction.lag.ms") {
		t.Fatalf("got %v, want ErrInvalidConfig naming min.compaction.lag.ms", err)
	}
	if err := s.validateTopicConfig("t", map[string]string{"min.compaction.lag.ms": "5"}); err != nil {
		t.Fatalf("valid override refused: %v", err)
	}
	if err := (&Session{}).validateTopicConfig("t", map[string]string{"min.compaction.lag.ms": "100"}); err != nil {
		t.Fatalf("without broker defaults, Kafka's apply: %v", err)
	}
	if err := (&Session{}).validateTopicConfig("t", map[string]string{"no.such.key": "1"}); !errors.Is(err, cluster.ErrInvalidConfig) {
		t.Fatalf("unknown key: %v", err)
	}
}
