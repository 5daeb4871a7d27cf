package main

import (
	"errors"
	"testing"
	"time"

	"github.com/kafkazk/broker/group"
)

// TestOffsetsConfig: the offsets.* keys of the group coordinator are read
// with Kafka's defaults and reach group.Config.
func TestOffsetsConfig(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal)})
	if err != nil {
		t.Fatal(err)
	}
	gc := coordinatorConfig(cfg, nil, group.Config{})
	if gc.OffsetsRetention != 7*24*time.Hour || gc.OffsetsRetentionCheckInterval != 10*time.Minute {
		t.Fatalf("defaults: retention %s, check interval %s; want 168h, 10m", gc.OffsetsRetention, gc.OffsetsRetentionCheckInterval)
	}
	if cfg.OffsetsTopicCompressionCodec != 0 {
		t.Fatalf("offsets.topic.compression.codec default %d, want 0", cfg.OffsetsTopicCompressionCodec)
	}
	cfg, err = loadConfig([]string{writeProps(t, minimal+"offsets.retention.minutes=3\noffsets.retention.check.interval.ms=1500\n"+
		"offsets.topic.compression.codec=4\n")})
	if err != nil {
		t.Fatal(err)
	}
	gc = coordinatorConfig(cfg, nil, group.Config{})
	if gc.OffsetsRetention != 3*time.Minute || gc.OffsetsRetentionCheckInterval != 1500*time.Millisecond || gc.CompressionCodec != 4 {
		t.Fatalf("set: retention %s, check interval %s, codec %d; want 3m, 1.5s, 4", gc.OffsetsRetention, gc.OffsetsRetentionCheckInterval, gc.CompressionCodec)
	}
	for _, bad := range []string{"offsets.retention.check.interval.ms=0", "offsets.topic.compression.codec=5", "offsets.topic.compression.codec=-1"} {
		_, err := loadConfig([]string{writeProps(t, minimal+bad+"\n")})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key+"=" != bad[:len(ce.Key)+1] {
			t.Errorf("%s: %v, want a ConfigError naming the key", bad, err)
		}
	}
}
