package zkcoord

import (
	"errors"
	"fmt"
	"strconv"
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
	s.epochZkVersion = epochZkVersion
	s.mu.Lock()
	s.isController = true
	s.controllerID = s.cfg.BrokerID
	s.controllerEpoch = epoch
	s.changed = true
	s.mu.Unlock()
	s.log.Info().Int32("controller_epoch", epoch).Int32("zk_version", epochZkVersion).Msg("elected controller")
	if s.cfg.OnControllerChange != nil {
		s.cfg.OnControllerChange(true, epoch)
	}
	// Pending deletions are controller work (KC onControllerFailover step 8).
	if err := s.refreshDeleteTopics(); err != nil {
		s.markDirty("topic deletion", err)
	}
}

// resign drops controllership (KC onControllerResignation).
func (s *Session) resign(why string) {
	s.mu.Lock()
	was := s.isController
	s.isController = false
	epoch := s.controllerEpoch
	if was {
		s.changed = true
	}
	s.mu.Unlock()
	if !was {
		return
	}
	s.log.Info().Int32("controller_epoch", epoch).Str("reason", why).Msg("resigned as controller")
	if s.cfg.OnControllerChange != nil {
		s.cfg.OnControllerChange(false, epoch)
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

// refreshDeleteTopics reads /admin/delete_topics (re-arming its watch) and,
// on the controller, completes each deletion.
func (s *Session) refreshDeleteTopics() error {
	kids, err := s.readChildren(watchKey{kind: wDeleteTopics}, deleteTopicsRootPath)
	if err != nil {
		return err
	}
	if !s.IsController() {
		return nil
	}
	var first error
	for _, t := range kids {
		if err := s.completeTopicDeletion(t); err != nil {
			if errors.Is(err, ErrNotController) {
				s.resign("controller epoch moved")
				return nil
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// completeTopicDeletion deletes every znode of topic t and then its
// /admin/delete_topics/<t> request, in one multi checked against our
// /controller_epoch zkVersion (KC TopicDeletionManager completeDeleteTopic).
func (s *Session) completeTopicDeletion(t string) error {
	ops := []any{&zk.CheckVersionRequest{Path: controllerEpochPath, Version: s.epochZkVersion}}
	parts, _, err := s.zk.Children(partitionsPath(t))
	switch {
	case err == nil:
		for _, name := range parts {
			part, perr := strconv.ParseInt(name, 10, 32)
			if perr != nil {
				return fmt.Errorf("delete topic %s: unexpected znode %q under %s", t, name, partitionsPath(t))
			}
			kids, _, err := s.zk.Children(partitionPath(t, int32(part)))
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return fmt.Errorf("children %s: %w", partitionPath(t, int32(part)), err)
			}
			if len(kids) > 0 {
				ops = append(ops, &zk.DeleteRequest{Path: partitionStatePath(t, int32(part)), Version: -1})
			}
			ops = append(ops, &zk.DeleteRequest{Path: partitionPath(t, int32(part)), Version: -1})
		}
		ops = append(ops, &zk.DeleteRequest{Path: partitionsPath(t), Version: -1})
	case errors.Is(err, zk.ErrNoNode):
	default:
		return fmt.Errorf("children %s: %w", partitionsPath(t), err)
	}
	for _, p := range []string{topicPath(t), configTopicPath(t)} {
		exists, _, err := s.zk.Exists(p)
		if err != nil {
			return fmt.Errorf("exists %s: %w", p, err)
		}
		if exists {
			ops = append(ops, &zk.DeleteRequest{Path: p, Version: -1})
		}
	}
	ops = append(ops, &zk.DeleteRequest{Path: deleteTopicsPath(t), Version: -1})
	if _, err := s.zk.Multi(ops...); err != nil {
		if errors.Is(err, zk.ErrBadVersion) {
			return fmt.Errorf("delete topic %s: check %s zk_version %d: %w", t, controllerEpochPath, s.epochZkVersion, ErrNotController)
		}
		return fmt.Errorf("delete topic %s: multi of %d ops: %w", t, len(ops), err)
	}
	s.log.Info().Str("topic", t).Int32("controller_epoch", s.ControllerEpoch()).Msg("deleted topic")
	return nil
}
