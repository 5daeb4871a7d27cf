package main

import (
	"errors"
	"math"
	"testing"
)

// TestConfigReplicationThrottledRate: leader.replication.throttled.rate
// and follower.replication.throttled.rate default to Long.MaxValue
// (unlimited), take bytes per second, and refuse negatives as Kafka's
// atLeast(0) does.
func TestConfigReplicationThrottledRate(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal)})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LeaderReplicationThrottledRate != math.MaxInt64 || cfg.FollowerReplicationThrottledRate != math.MaxInt64 {
		t.Fatalf("defaults %d, %d, want Long.MaxValue", cfg.LeaderReplicationThrottledRate, cfg.FollowerReplicationThrottledRate)
	}
	cfg, err = loadConfig([]string{writeProps(t, minimal+"leader.replication.throttled.rate=1000\n"),
		"--override", "follower.replication.throttled.rate=2000"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LeaderReplicationThrottledRate != 1000 || cfg.FollowerReplicationThrottledRate != 2000 {
		t.Fatalf("got %d, %d, want 1000, 2000", cfg.LeaderReplicationThrottledRate, cfg.FollowerReplicationThrottledRate)
	}
	for _, key := range []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"} {
		_, err := loadConfig([]string{writeProps(t, minimal+key+"=-1\n")})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != key {
			t.Fatalf("%s=-1: got %v, want a ConfigError naming it", key, err)
		}
	}
}
