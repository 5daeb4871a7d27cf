package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// The controller operations an admin client asks for (Kafka's
// AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders,
// which clients send to the controller). Each runs on the controller loop
// through c.calls, as ControlledShutdown does; a broker that is not the
// controller answers ErrNotController, as Kafka's does.

// callController runs fn on the loop of this broker's controller and
// returns its error, ErrNotController if there is no controller here or it
// stops first, or ctx's error.
func (s *Session) callController(ctx context.Context, what string, fn func(c *controller) error) error {
	s.mu.Lock()
	c := s.ctrl
	s.mu.Unlock()
	notController := fmt.Errorf("%s: %w", what, ErrNotController)
	if c == nil {
		return notController
	}
	errc := make(chan error, 1)
	call := func() {
		err := fn(c)
		if err != nil {
			c.checkFenced(err)
		}
		errc <- err
	}
	select {
	case c.calls <- call:
	case <-c.quit:
		return notController
	case <-c.exited:
		return notController
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-errc:
		return err
	case <-c.exited:
		select {
		case err := <-errc:
			return err
		default:
			return notController
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AlterPartitionReassignments starts (or, for a nil target, cancels) the
// reassignment of each partition in reqs and returns each one's outcome:
// nil (started and in its topic znode; it completes in the background),
// or an error wrapping cluster.ErrInvalidReplicaAssignment,
// ErrUnknownTopic or ErrNoReassignmentInProgress. A partition whose topic
// znode write failed is answered once the controller's retry lands it; if
// ctx ends first, its error wraps context.DeadlineExceeded
// (REQUEST_TIMED_OUT) and the controller drops it.
func (s *Session) AlterPartitionReassignments(ctx context.Context, reqs map[cluster.TopicPartition][]int32) (map[cluster.TopicPartition]error, error) {
	var (
		out     map[cluster.TopicPartition]error
		pending map[cluster.TopicPartition]*reassignment
	)
	err := s.callController(ctx, "alter partition reassignments", func(c *controller) error {
		var err error
		out, pending, err = c.alterReassignments(reqs)
		return err
	})
	if err != nil {
		return nil, err
	}
	check := func(ctx context.Context, final bool) error {
		return s.callController(ctx, "alter partition reassignments", func(c *controller) error {
			for tp, e := range c.checkReassignments(pending, final) {
				if out[tp] = e; !errors.Is(e, errReassignmentNotWritten) {
					delete(pending, tp)
				}
			}
			return nil
		})
	}
	for len(pending) > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(ctrlRetryMin):
			if err := check(ctx, false); err != nil && ctx.Err() == nil {
				return nil, err
			}
		}
	}
	if len(pending) > 0 {
		// The request's time is up: a last attempt, then the rest is
		// dropped (not left to land after a REQUEST_TIMED_OUT).
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := check(fctx, true); err != nil {
			for tp := range pending {
				out[tp] = fmt.Errorf("partition %s-%d: reassignment not written in time (%w): %w", tp.Topic, tp.Partition, err, context.DeadlineExceeded)
			}
		}
	}
	return out, nil
}

// ListPartitionReassignments lists the partitions of tps (nil: all) being
// reassigned.
func (s *Session) ListPartitionReassignments(ctx context.Context, tps []cluster.TopicPartition) ([]cluster.PartitionReassignment, error) {
	var out []cluster.PartitionReassignment
	err := s.callController(ctx, "list partition reassignments", func(c *controller) error {
		var err error
		out, err = c.listReassignments(tps)
		return err
	})
	return out, err
}

// ElectLeaders runs a leader election of typ for tps (nil: every
// partition) and returns each partition's outcome (see electLeaders).
func (s *Session) ElectLeaders(ctx context.Context, typ cluster.ElectionType, tps []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	var out map[cluster.TopicPartition]error
	err := s.callController(ctx, "elect leaders", func(c *controller) error {
		var err error
		out, err = c.electLeaders(typ, tps)
		return err
	})
	return out, err
}

// SetUncleanLeaderElectionDefault sets the cluster-wide default of
// unclean.leader.election.enable (server.properties' value until a dynamic
// broker config changes it); a topic's override still wins. Turning it on
// makes this broker's controller, if it is one, elect for every offline
// partition at once, as Kafka's UncleanLeaderElectionEnable event does; a
// controller elected later reads the value set here.
func (s *Session) SetUncleanLeaderElectionDefault(enable bool) {
	s.mu.Lock()
	was := s.cfg.UncleanLeaderElection
	s.cfg.UncleanLeaderElection = enable
	s.mu.Unlock()
	if enable && !was {
		s.log.Info().Msg("unclean.leader.election.enable turned on by broker config")
		s.postController(pendingEvents{uncleanDefault: true})
	}
}

// refreshAdminRequests reads /admin/reassign_partitions and
// /admin/preferred_replica_election while this broker is the controller,
// arming a watch on each (data if it exists, existence if not), and hands
// them to the controller loop (Kafka's PartitionReassignmentHandler and
// PreferredReplicaElectionHandler).
func (s *Session) refreshAdminRequests(key watchKind) error {
	if !s.IsController() {
		return nil
	}
	for _, w := range []struct {
		kind watchKind
		path string
		ev   pendingEvents
	}{
		{wReassignPartitions, reassignPartitionsPath, pendingEvents{reassign: true}},
		{wPreferredElection, preferredReplicaElectionPath, pendingEvents{preferredElection: true}},
	} {
		if key != 0 && key != w.kind {
			continue
		}
		if _, _, _, err := s.readData(watchKey{kind: w.kind}, w.path); err != nil {
			return err
		}
		s.postController(w.ev)
	}
	return nil
}

// forgetAdminRequestWatches drops the admin request watches of a
// controller that resigned (a later fire is ignored).
func (s *Session) forgetAdminRequestWatches() {
	delete(s.armed, watchKey{kind: wReassignPartitions})
	delete(s.armed, watchKey{kind: wPreferredElection})
}
