package main

import (
	"errors"
	"testing"

	"github.com/kafkazk/broker/protocol"
)

// max.incremental.fetch.session.cache.slots: Kafka's default 1000,
// atLeast(0), and 0 reaching the server as "no sessions".
func TestConfigFetchSessionCacheSlots(t *testing.T) {
	cfg, err := loadConfig([]string{writeProps(t, minimal)})
	if err != nil || cfg.MaxIncrementalFetchSessionCacheSlots != 1000 {
		t.Fatalf("default: %v, slots %d; want 1000", err, cfg.MaxIncrementalFetchSessionCacheSlots)
	}
	cfg, err = loadConfig([]string{writeProps(t, minimal+"max.incremental.fetch.session.cache.slots=0\n")})
	if err != nil || cfg.MaxIncrementalFetchSessionCacheSlots != 0 {
		t.Fatalf("=0: %v, slots %d", err, cfg.MaxIncrementalFetchSessionCacheSlots)
	}
	if got := protocol.ServerFetchSessionCacheSlots(cfg.MaxIncrementalFetchSessionCacheSlots); got >= 0 {
		t.Errorf("server slots for 0: %d, want negative (none)", got)
	}
	_, err = loadConfig([]string{writeProps(t, minimal+"max.incremental.fetch.session.cache.slots=-1\n")})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "max.incremental.fetch.session.cache.slots" {
		t.Errorf("=-1: error %v, want one naming the key", err)
	}
}
