package zkcoord

import (
	"context"
	"fmt"

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
// nil (started; it completes in the background), or an error wrapping
// cluster.ErrInvalidReplicaAssignment, ErrUnknownTopic or
// ErrNoReassignmentInProgress. The answer comes once each started
// reassignment is in its topic znode and announced (unless ZooKeeper
// failed meanwhile: the controller retries it).
func (s *Session) AlterPartitionReassignments(ctx context.Context, reqs map[cluster.TopicPartition][]int32) (map[cluster.TopicPartition]error, error) {
	var out map[cluster.TopicPartition]error
	err := s.callController(ctx, "alter partition reassignments", func(c *controller) error {
		var err error
		out, err = c.alterReassignments(reqs)
		return err
	})
	return out, err
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
