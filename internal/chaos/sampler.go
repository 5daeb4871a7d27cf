package chaos

import (
	"strconv"
	"sync"
	"time"
)

// Sample is one read of the cluster state from ZooKeeper.
type Sample struct {
	At              time.Duration
	Controller      int32
	ControllerEpoch int32
	Brokers         map[int32]bool // registered; nil if unreadable
	States          []PartState    // by partition; Leader -2 if unreadable
}

// Sampler reads /controller, /controller_epoch, /brokers/ids and every
// partition state znode every interval, straight from ZooKeeper (never
// through a broker's proxy).
type Sampler struct {
	c     *Cluster
	h     *History
	topic string
	parts int32

	mu      sync.Mutex
	samples []Sample
	stop    chan struct{}
	done    chan struct{}
}

// StartSampler samples every interval until Stop.
func StartSampler(c *Cluster, h *History, topic string, parts int32, interval time.Duration) *Sampler {
	s := &Sampler{c: c, h: h, topic: topic, parts: parts, stop: make(chan struct{}), done: make(chan struct{})}
	s.sampleOnce()
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sampleOnce()
			}
		}
	}()
	return s
}

func (s *Sampler) sampleOnce() {
	sm := Sample{At: s.h.Now(), Controller: s.c.Controller(), ControllerEpoch: -1, Brokers: map[int32]bool{}}
	if data, _, err := s.c.ZK.Get(s.c.Path("/controller_epoch")); err == nil {
		if n, err := strconv.Atoi(string(data)); err == nil {
			sm.ControllerEpoch = int32(n)
		}
	}
	if ids, _, err := s.c.ZK.Children(s.c.Path("/brokers/ids")); err != nil {
		sm.Brokers = nil // unreadable (ZooKeeper down), not "none registered"
	} else {
		for _, id := range ids {
			if n, err := strconv.Atoi(id); err == nil {
				sm.Brokers[int32(n)] = true
			}
		}
	}
	for p := int32(0); p < s.parts; p++ {
		st, err := s.c.State(s.topic, p)
		if err != nil {
			st = PartState{Leader: -2, LeaderEpoch: -1}
		}
		sm.States = append(sm.States, st)
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
}

// Latest is the newest sample.
func (s *Sampler) Latest() Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples[len(s.samples)-1]
}

// Leader is partition p's leader in the newest sample.
func (s *Sampler) Leader(p int32) int32 {
	l := s.Latest()
	if int(p) >= len(l.States) {
		return -1
	}
	return l.States[p].Leader
}

// Stop ends sampling and returns every sample.
func (s *Sampler) Stop() []Sample {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}
