package main

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// configPusher applies topic config changes to the live replicas of this
// broker without a restart. The ZooKeeper session calls changed (from its
// goroutine, so it must not block) whenever it has read a topic's
// /config/topics/<t>; run recomputes the topic's effective config (broker
// defaults + overrides) and hands it to the replica manager. Topics named
// again before run gets to them are applied once.
type configPusher struct {
	log zerolog.Logger

	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{} // buffer 1
}

func newConfigPusher(log zerolog.Logger) *configPusher {
	return &configPusher{log: log, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// changed records that topic's overrides may have changed.
func (p *configPusher) changed(topic string) {
	p.mu.Lock()
	p.pending[topic] = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run applies pending changes until ctx ends: effective computes a topic's
// config, replicas receives it.
func (p *configPusher) run(ctx context.Context, effective func(topic string) cluster.LogConfig, replicas *partition.Manager) {
	for {
		p.mu.Lock()
		topics := p.pending
		p.pending = map[string]bool{}
		p.mu.Unlock()
		for t := range topics {
			if n := replicas.UpdateConfig(t, effective(t)); n > 0 {
				p.log.Info().Str("topic", t).Int("replicas", n).Msg("applied topic config change")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
	}
}
