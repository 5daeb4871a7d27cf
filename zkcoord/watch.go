package zkcoord

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/go-zookeeper/zk"
)

// Watches. ZooKeeper watches fire once, so every read by the session
// goroutine re-arms the watch of what it read, as Kafka's ZooKeeperClient
// does ("register handler and check existence"). s.armed records which
// watches are set on the server, each with a unique token: a fire whose
// token is not the current one (an old session's watch, or a topic that was
// dropped) is ignored, so duplicate server watches are harmless.

type watchKind uint8

const (
	wBrokerIDs          watchKind = iota + 1 // children of /brokers/ids
	wBroker                                  // /brokers/ids/<id>
	wController                              // /controller
	wTopics                                  // children of /brokers/topics
	wTopic                                   // /brokers/topics/<t>
	wConfig                                  // /config/topics/<t>
	wDeleteTopics                            // children of /admin/delete_topics
	wIsrChanges                              // children of /isr_change_notification (controller only)
	wConfigChanges                           // children of /config/changes
	wReassignPartitions                      // /admin/reassign_partitions (controller only)
	wPreferredElection                       // /admin/preferred_replica_election (controller only)
	wBrokerConfig                            // /config/brokers/<entity>; the entity is in watchKey.topic
	wACLChanges                              // children of an ACL change store; its path is in watchKey.topic
	wLogDirEvents                            // children of /log_dir_event_notification (controller only)
)

type watchKey struct {
	kind  watchKind
	topic string
	id    int32 // broker id
}

type watchFire struct {
	key   watchKey
	token uint64
	ev    zk.Event
}

// topicEntry is one topic in the cache: only its config. Partition
// assignments and states are not cached: the controller reads them fresh
// into its own context, and brokers learn them from its LeaderAndIsr and
// UpdateMetadata requests (the protocol's metadata cache), as in Kafka, so
// no broker watches a partition state znode. Its map is replaced only by
// the session goroutine under s.mu; readers copy under s.mu.
type topicEntry struct {
	config map[string]string
}

// arm forwards the one event of ch to the session goroutine.
func (s *Session) arm(key watchKey, ch <-chan zk.Event) {
	s.tokenSeq++
	token := s.tokenSeq
	s.armed[key] = token
	s.goFunc(func() {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			select {
			case s.fires <- watchFire{key: key, token: token, ev: ev}:
			case <-s.done:
			}
		case <-s.done:
		}
	})
}

// readData reads node p, arming a watch (data if it exists, existence if
// not) unless key's watch is already armed. ok is false if p is missing.
func (s *Session) readData(key watchKey, p string) (data []byte, stat *zk.Stat, ok bool, err error) {
	if _, armed := s.armed[key]; armed {
		data, stat, err = s.zk.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil, false, nil
		}
		if err != nil {
			return nil, nil, false, fmt.Errorf("get %s: %w", p, err)
		}
		return data, stat, true, nil
	}
	data, stat, ch, err := s.zk.GetW(p)
	if err == nil {
		s.arm(key, ch)
		return data, stat, true, nil
	}
	if !errors.Is(err, zk.ErrNoNode) {
		return nil, nil, false, fmt.Errorf("get %s: %w", p, err)
	}
	exists, _, ch, err := s.zk.ExistsW(p)
	if err != nil {
		return nil, nil, false, fmt.Errorf("exists %s: %w", p, err)
	}
	s.arm(key, ch)
	if !exists {
		return nil, nil, false, nil
	}
	data, stat, err = s.zk.Get(p) // created between our two reads
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("get %s: %w", p, err)
	}
	return data, stat, true, nil
}

// readChildren lists p's children, arming a children watch unless armed.
func (s *Session) readChildren(key watchKey, p string) ([]string, error) {
	if _, armed := s.armed[key]; armed {
		kids, _, err := s.zk.Children(p)
		if err != nil {
			return nil, fmt.Errorf("children %s: %w", p, err)
		}
		return kids, nil
	}
	kids, _, ch, err := s.zk.ChildrenW(p)
	if err != nil {
		return nil, fmt.Errorf("children %s: %w", p, err)
	}
	s.arm(key, ch)
	return kids, nil
}

// handleFire re-reads (and so re-arms) what a fired watch covers.
func (s *Session) handleFire(f watchFire) {
	if s.armed[f.key] != f.token {
		return // superseded: an old session's or a dropped topic's watch
	}
	delete(s.armed, f.key)
	if f.ev.Type == zk.EventNotWatching {
		// The client dropped every watch because the session expired;
		// checkSession re-arms them all once the new session is up.
		s.dirty = true
		return
	}
	s.log.Debug().Str("zk_path", s.zk.rel(f.ev.Path)).Stringer("zk_event", f.ev.Type).Msg("watch fired")
	var err error
	switch f.key.kind {
	case wBrokerIDs:
		err = s.refreshBrokerIDs(false)
		s.postController(pendingEvents{brokers: true})
	case wBroker:
		err = s.refreshBroker(f.key.id)
		s.postController(pendingEvents{brokers: true})
	case wController:
		err = s.refreshController()
	case wTopics:
		err = s.refreshTopics(false)
		s.postController(pendingEvents{topicList: true})
	case wTopic:
		err = s.refreshTopic(f.key.topic, false)
		s.postController(pendingEvents{topics: map[string]bool{f.key.topic: true}})
	case wConfig:
		err = s.refreshConfig(f.key.topic)
		s.postController(pendingEvents{configs: map[string]bool{f.key.topic: true}})
	case wDeleteTopics:
		err = s.refreshDeleteTopics()
	case wIsrChanges:
		err = s.refreshIsrChanges()
	case wLogDirEvents:
		err = s.refreshLogDirEvents()
	case wConfigChanges:
		err = s.refreshConfigChanges()
	case wBrokerConfig:
		err = s.refreshBrokerConfig(f.key.topic)
	case wACLChanges:
		err = s.refreshACLChanges(f.key.topic)
	case wReassignPartitions, wPreferredElection:
		err = s.refreshAdminRequests(f.key.kind)
	}
	if err != nil {
		s.markDirty("refresh "+s.zk.rel(f.ev.Path), err)
	}
}

// refreshBrokerIDs reads the live broker ids and the registration of each
// new one (every one if full).
func (s *Session) refreshBrokerIDs(full bool) error {
	kids, err := s.readChildren(watchKey{kind: wBrokerIDs}, brokerIDsPath)
	if err != nil {
		return err
	}
	live := make(map[int32]bool, len(kids))
	for _, k := range kids {
		if id, err := strconv.ParseInt(k, 10, 32); err == nil {
			live[int32(id)] = true
		}
	}
	var fresh []int32
	s.mu.Lock()
	for id := range s.brokers {
		if !live[id] {
			delete(s.brokers, id)
			delete(s.armed, watchKey{kind: wBroker, id: id})
			s.changed = true
			s.log.Info().Int32("broker", id).Msg("broker left")
		}
	}
	for id := range live {
		if _, known := s.brokers[id]; full || !known {
			fresh = append(fresh, id)
		}
	}
	s.mu.Unlock()
	var first error
	for _, id := range fresh {
		if err := s.refreshBroker(id); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// refreshBroker reads one registration; its czxid is the broker epoch.
func (s *Session) refreshBroker(id int32) error {
	p := brokerPath(id)
	data, stat, ok, err := s.readData(watchKey{kind: wBroker, id: id}, p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		if _, known := s.brokers[id]; known {
			delete(s.brokers, id)
			s.changed = true
		}
		return nil
	}
	b, err := decodeBrokerRegistration(id, data)
	if err != nil {
		// A registration we cannot parse is not retryable; the broker
		// stays out of the cache until it registers again.
		s.log.Error().Err(err).Str("zk_path", p).Msg("ignoring broker registration")
		return nil
	}
	b.Epoch = stat.Czxid
	if old, known := s.brokers[id]; !known || old.Epoch != b.Epoch {
		s.log.Info().Int32("broker", id).Int64("broker_epoch", b.Epoch).Msg("broker registered")
	}
	s.brokers[id] = b
	s.changed = true
	return nil
}

// refreshTopics reads the topic names, drops deleted topics and reads each
// new topic (every topic if full).
func (s *Session) refreshTopics(full bool) error {
	kids, err := s.readChildren(watchKey{kind: wTopics}, topicsPath)
	if err != nil {
		return err
	}
	exists := make(map[string]bool, len(kids))
	for _, t := range kids {
		exists[t] = true
	}
	var fresh []string
	s.mu.Lock()
	for t := range s.topics {
		if !exists[t] {
			s.dropTopicLocked(t)
		}
	}
	for _, t := range kids {
		if _, known := s.topics[t]; full || !known {
			fresh = append(fresh, t)
		}
	}
	s.mu.Unlock()
	var first error
	for _, t := range fresh {
		if err := s.refreshTopic(t, full); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// dropTopicLocked removes t from the cache and forgets its watches. Caller
// holds s.mu and is the session goroutine.
func (s *Session) dropTopicLocked(t string) {
	if _, ok := s.topics[t]; !ok {
		return
	}
	delete(s.topics, t)
	delete(s.armed, watchKey{kind: wTopic, topic: t})
	delete(s.armed, watchKey{kind: wConfig, topic: t})
	s.changed = true
	s.log.Info().Str("topic", t).Msg("topic removed")
}

// refreshTopic reads a topic's assignment znode, re-arming its watch (a
// fire tells the controller of new partitions), and the config of a topic
// new to the cache (or of every topic if full).
func (s *Session) refreshTopic(t string, full bool) error {
	p := topicPath(t)
	_, _, ok, err := s.readData(watchKey{kind: wTopic, topic: t}, p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if !ok {
		s.dropTopicLocked(t)
		s.mu.Unlock()
		return nil
	}
	_, known := s.topics[t]
	if !known {
		s.topics[t] = &topicEntry{}
		s.changed = true
		s.log.Info().Str("topic", t).Msg("topic added")
	}
	s.mu.Unlock()
	if full || !known {
		return s.refreshConfig(t)
	}
	return nil
}

// refreshConfig reads /config/topics/<t> of a cached topic.
func (s *Session) refreshConfig(t string) error {
	s.mu.Lock()
	_, ok := s.topics[t]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	p := configTopicPath(t)
	data, _, ok, err := s.readData(watchKey{kind: wConfig, topic: t}, p)
	if err != nil {
		return err
	}
	var cfg map[string]string
	if ok {
		if cfg, err = decodeTopicConfig(t, data); err != nil {
			s.log.Error().Err(err).Str("zk_path", p).Msg("ignoring topic config")
			cfg = nil
		}
	}
	s.mu.Lock()
	e, still := s.topics[t]
	if still {
		e.config = cfg
		s.changed = true
	}
	s.mu.Unlock()
	if still && s.cfg.OnTopicConfigChange != nil {
		s.cfg.OnTopicConfigChange(t)
	}
	return nil
}

// refreshConfigChanges lists /config/changes, re-arming its children
// watch, hands the notifications not yet processed to the SCRAM credential
// watch (users/<user>: scram.go) and purges the expired ones (notify.go).
// This broker applies topic and broker configs from its data watches on
// /config/topics/<t> and /config/brokers/<entity> (refreshConfig,
// refreshBrokerConfig), so for those purging is all it does. A failed read
// of a notification's subject is retried from that notification; only
// that and a failed listing (the watch) are retried.
func (s *Session) refreshConfigChanges() error {
	kids, err := s.readChildren(watchKey{kind: wConfigChanges}, configChangesPath)
	if err != nil {
		return err
	}
	if err := s.processUserConfigChanges(kids); err != nil {
		return err
	}
	s.purgeNotifications(configChangesPath, configChangeNamePrefix, kids)
	return nil
}
