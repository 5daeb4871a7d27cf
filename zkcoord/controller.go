package zkcoord

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
)

// Controller election (KC elect, KZC registerControllerAndIncrementControllerEpoch
// of 2.2+). Every registered broker watches /controller; when it is missing,
// each campaigns by creating the ephemeral /controller and bumping
// /controller_epoch in one multi conditional on the epoch's zkVersion. The
// winner keeps the new zkVersion and puts a check on it into every
// controller write, so a deposed controller's writes fail (fencing).

// refreshController reads /controller (re-arming its watch), resigns if
// someone else holds it, and campaigns if nobody does.
func (s *Session) refreshController() error {
	data, stat, ok, err := s.readData(watchKey{kind: wController}, controllerPath)
	if err != nil {
		return err
	}
	if !ok {
		s.setControllerID(-1)
		s.resign("/controller deleted")
		if s.registered && !s.needRegister {
			return s.campaign()
		}
		return nil
	}
	id, err := decodeController(data)
	if err != nil {
		s.log.Error().Err(err).Str("zk_path", controllerPath).Msg("ignoring /controller")
		id = -1
	}
	s.setControllerID(id)
	if id != s.cfg.BrokerID {
		s.resign("controller moved")
		epoch, _, err := s.readControllerEpoch(false)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.controllerEpoch = epoch
		s.mu.Unlock()
		return nil
	}
	if !s.IsController() && stat.EphemeralOwner == s.zk.c.SessionID() {
		// Our own node, but we lost track of winning (a lost multi
		// response): the epoch we wrote is the current one.
		epoch, ver, err := s.readControllerEpoch(false)
		if err != nil {
			return err
		}
		s.becomeController(epoch, ver)
	}
	return nil
}

func (s *Session) setControllerID(id int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.controllerID != id {
		s.controllerID = id
		s.changed = true
		s.log.Info().Int32("controller_id", id).Msg("controller changed")
	}
}

// readControllerEpoch returns /controller_epoch and its zkVersion. With
// create, a missing node is created with the initial epoch 0 (2.2+).
func (s *Session) readControllerEpoch(create bool) (int32, int32, error) {
	for {
		data, stat, err := s.zk.Get(controllerEpochPath)
		if errors.Is(err, zk.ErrNoNode) {
			if !create {
				return 0, -1, nil
			}
			_, err := s.zk.Create(controllerEpochPath, encodeControllerEpoch(0), 0)
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return 0, 0, fmt.Errorf("create %s: %w", controllerEpochPath, err)
			}
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("get %s: %w", controllerEpochPath, err)
		}
		epoch, err := decodeControllerEpoch(data)
		if err != nil {
			return 0, 0, err
		}
		return epoch, stat.Version, nil
	}
}

// campaign tries to become the controller. Losing is not an error: the
// winner's /controller fires our watch and refreshController records it.
func (s *Session) campaign() error {
	epoch, ver, err := s.readControllerEpoch(true)
	if err != nil {
		return err
	}
	newEpoch := epoch + 1
	res, err := s.zk.Multi(
		&zk.CreateRequest{Path: controllerPath, Data: encodeController(s.cfg.BrokerID, time.Now().UnixMilli()), Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: controllerEpochPath, Data: encodeControllerEpoch(newEpoch), Version: ver})
	switch {
	case err == nil:
		s.becomeController(newEpoch, res[1].Stat.Version)
		return nil
	case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion):
		// KZC checkControllerAndEpoch: it is still ours only if /controller
		// names us and the epoch is the one we tried to write.
		data, _, gerr := s.zk.Get(controllerPath)
		if gerr == nil {
			if id, derr := decodeController(data); derr == nil && id == s.cfg.BrokerID {
				if e, v, eerr := s.readControllerEpoch(false); eerr == nil && e == newEpoch {
					s.becomeController(newEpoch, v)
					return nil
				}
			}
		}
		s.log.Debug().Err(err).Int32("controller_epoch", newEpoch).Msg("lost controller election")
		return nil
	default:
		return fmt.Errorf("elect: multi create %s, set %s at zk_version %d: %w", controllerPath, controllerEpochPath, ver, err)
	}
}

func (s *Session) becomeController(epoch, epochZkVersion int32) {
	c := newController(s, epoch, epochZkVersion)
	s.mu.Lock()
	s.isController = true
	s.controllerID = s.cfg.BrokerID
	s.controllerEpoch = epoch
	s.ctrl = c
	s.changed = true
	s.mu.Unlock()
	s.log.Info().Int32("controller_epoch", epoch).Int32("zk_version", epochZkVersion).Msg("elected controller")
	if !s.goFunc(c.run) {
		return
	}
	if s.cfg.OnControllerChange != nil {
		s.cfg.OnControllerChange(true, epoch)
	}
	// The controller's own watch (KC onControllerFailover step 2); the
	// loop's failover reads everything else itself.
	if err := s.refreshIsrChanges(); err != nil {
		s.markDirty("read isr changes", err)
	}
	if err := s.refreshLogDirEvents(); err != nil {
		s.markDirty("read log dir events", err)
	}
	if err := s.refreshAdminRequests(0); err != nil {
		s.markDirty("read admin requests", err)
	}
}

// resign drops controllership (KC onControllerResignation): the loop is
// told to stop (without waiting: it may be inside a ZooKeeper call, and
// whatever it still writes is fenced) and the ISR-change watch lapses.
func (s *Session) resign(why string) {
	s.mu.Lock()
	was := s.isController
	s.isController = false
	epoch := s.controllerEpoch
	c := s.ctrl
	s.ctrl = nil
	if was {
		s.changed = true
	}
	s.mu.Unlock()
	if c != nil {
		c.stop()
	}
	delete(s.armed, watchKey{kind: wIsrChanges})
	delete(s.armed, watchKey{kind: wLogDirEvents})
	s.forgetAdminRequestWatches()
	if !was {
		return
	}
	s.log.Info().Int32("controller_epoch", epoch).Str("reason", why).Msg("resigned as controller")
	if s.cfg.OnControllerChange != nil {
		s.cfg.OnControllerChange(false, epoch)
	}
}

// controllerFenced runs on the session goroutine when controller c found
// its epoch check failing (another controller has a newer epoch) or its
// session gone; why says which. It resigns and, if /controller is still
// our own node, deletes it so that a new election runs (KC
// triggerControllerMove). After an expiry the node went with the old
// session, and the new session's resync re-enters the election.
func (s *Session) controllerFenced(c *controller, why string) {
	s.mu.Lock()
	current := s.ctrl == c
	s.mu.Unlock()
	if !current {
		return
	}
	s.resign(why)
	_, st, err := s.zk.Get(controllerPath)
	if err == nil && st.EphemeralOwner == s.zk.c.SessionID() {
		if err := s.zk.Delete(controllerPath, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
			s.markDirty("delete "+controllerPath, err)
		}
	}
}

// postController hands events to the running controller, if any. Caller
// is the session goroutine; it never blocks.
func (s *Session) postController(ev pendingEvents) {
	s.mu.Lock()
	c := s.ctrl
	s.mu.Unlock()
	if c != nil {
		c.post(ev)
	}
}

// ControllerID is the broker id in /controller, or -1 if there is none.
func (s *Session) ControllerID() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.controllerID
}

// IsController reports whether this broker is the controller.
func (s *Session) IsController() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.isController
}

// ControllerEpoch is this broker's epoch while it is the controller, and
// otherwise the last value read from /controller_epoch.
func (s *Session) ControllerEpoch() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.controllerEpoch
}

// refreshDeleteTopics reads /admin/delete_topics (re-arming its watch)
// and, on the controller, hands the deletions to the controller loop.
func (s *Session) refreshDeleteTopics() error {
	if _, err := s.readChildren(watchKey{kind: wDeleteTopics}, deleteTopicsRootPath); err != nil {
		return err
	}
	s.postController(pendingEvents{deletions: true})
	return nil
}

// refreshIsrChanges arms the /isr_change_notification children watch while
// this broker is the controller and hands the notifications to the loop.
func (s *Session) refreshIsrChanges() error {
	if !s.IsController() {
		return nil
	}
	if _, err := s.readChildren(watchKey{kind: wIsrChanges}, isrChangeNotificationPath); err != nil {
		return err
	}
	s.postController(pendingEvents{isrChanges: true})
	return nil
}
