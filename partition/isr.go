package partition

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// isrWriteTimeout bounds one conditional ISR write. The write runs on a
// follower's fetch (expansion) or the ISR expiration pass (shrink), so a
// stuck ZooKeeper must not hold them forever.
const isrWriteTimeout = 10 * time.Second

// isrChange is an ISR write a leader proposes: the whole new state, with
// the zkVersion it was based on.
type isrChange struct {
	state  cluster.LeaderAndIsr
	expand bool
}

// highWatermarkCandidate is Kafka 2.4+'s HW rule (§3.5): the minimum of the
// leader's LEO and the LEO of every follower that is in the ISR or caught up
// within lag. An ISR member that has not fetched in this epoch (LEO -1, or
// no state at all) holds the candidate below any HW. The caller only moves
// the HW forward.
func highWatermarkCandidate(leaderLEO int64, self int32, isr []int32, followers map[int32]*followerState,
	now time.Time, lag time.Duration) int64 {
	candidate := leaderLEO
	for _, id := range isr {
		if id == self {
			continue
		}
		f := followers[id]
		if f == nil {
			return -1
		}
		candidate = min(candidate, f.logEndOffset)
	}
	for id, f := range followers {
		if slices.Contains(isr, id) || f.lastCaughtUpTime.IsZero() || now.Sub(f.lastCaughtUpTime) > lag {
			continue
		}
		candidate = min(candidate, f.logEndOffset)
	}
	return candidate
}

// outOfSyncReplicas lists the ISR followers that are out of sync at now: a
// LEO other than the leader's and no catch-up for longer than lag (§3.2).
// Time, not record count, decides.
func outOfSyncReplicas(leaderLEO int64, self int32, isr []int32, followers map[int32]*followerState,
	now time.Time, lag time.Duration) []int32 {
	var out []int32
	for _, id := range isr {
		if id == self {
			continue
		}
		f := followers[id]
		if f == nil {
			continue // not an assigned replica any more; the controller removes it
		}
		if untilOutOfSync(f.logEndOffset, leaderLEO, f.lastCaughtUpTime, now, lag) < 0 {
			out = append(out, id)
		}
	}
	return out
}

// maybeExpandIsrLocked proposes adding follower id to the ISR when its LEO
// has reached the HW and the start of this leader epoch (§3.3; the second
// condition keeps out a follower that may lack committed records of the
// current epoch, KAFKA-7128). Caller holds r.mu.
func (r *Replica) maybeExpandIsrLocked(id int32) *isrChange {
	if !r.isLeaderLocked() || !r.isrWritable || r.isrChangeInFlight || slices.Contains(r.isr, id) {
		return nil
	}
	f := r.followers[id]
	if f == nil || f.logEndOffset < r.hw || f.logEndOffset < r.leaderEpochStartOffset {
		return nil
	}
	return r.proposeIsrLocked(append(slices.Clone(r.isr), id), true)
}

// maybeShrinkIsrLocked proposes removing the out-of-sync followers. It
// also writes the ISR when a member only of the maximal ISR (of a failed
// write whose outcome is unknown) is out of sync, even if the ISR itself
// is unchanged: the write's success proves the failed one did not land
// and lets the HW leave that member behind, where otherwise only a new
// state from the controller would. Caller holds r.mu.
func (r *Replica) maybeShrinkIsrLocked(now time.Time) *isrChange {
	if !r.isLeaderLocked() || !r.isrWritable || r.isrChangeInFlight {
		return nil
	}
	leo := r.log.LogEndOffset()
	out := outOfSyncReplicas(leo, r.brokerID, r.isr, r.followers, now, r.lagTimeMax)
	var unresolved []int32
	for _, id := range r.maximalIsr {
		if slices.Contains(r.isr, id) {
			continue
		}
		if f := r.followers[id]; f == nil || untilOutOfSync(f.logEndOffset, leo, f.lastCaughtUpTime, now, r.lagTimeMax) < 0 {
			unresolved = append(unresolved, id)
		}
	}
	if len(out) == 0 && len(unresolved) == 0 {
		return nil
	}
	newIsr := slices.DeleteFunc(slices.Clone(r.isr), func(id int32) bool { return slices.Contains(out, id) })
	for _, id := range out {
		f := r.followers[id]
		r.logger.Warn().Int32("replica", id).Int64("replica_leo", f.logEndOffset).Int64("leo", leo).
			Dur("lag", now.Sub(f.lastCaughtUpTime)).Msg("follower out of sync, shrinking ISR")
	}
	if len(unresolved) > 0 {
		r.logger.Warn().Ints32("replicas", unresolved).Ints32("isr", newIsr).Ints32("maximal_isr", r.maximalIsr).
			Msg("out-of-sync followers may be in the ISR after a write of unknown outcome, writing the ISR without them")
	}
	return r.proposeIsrLocked(newIsr, false)
}

// proposeIsrLocked marks an ISR change in flight and widens the maximal
// ISR by its new members until the outcome is known. Caller holds r.mu.
func (r *Replica) proposeIsrLocked(newIsr []int32, expand bool) *isrChange {
	r.isrChangeInFlight = true
	maximal := slices.Clone(r.hwIsrLocked())
	for _, id := range newIsr {
		if !slices.Contains(maximal, id) {
			maximal = append(maximal, id)
		}
	}
	r.maximalIsr = maximal
	return &isrChange{expand: expand, state: cluster.LeaderAndIsr{
		Leader: r.brokerID, LeaderEpoch: r.leaderEpoch, Isr: newIsr,
		ControllerEpoch: r.controllerEpoch, ZkVersion: r.zkVersion,
	}}
}

// completeIsrChange applies the outcome of writing ch and reports whether
// the ISR changed (to be announced with NotifyIsrChange) and whether that
// change added a member. On success the new ISR and zkVersion take effect,
// the maximal ISR is the ISR again, the HW may advance and waiters wake.
// On ErrStateConflict with the stored state read back (a
// *StateConflictError) that is this leader's own state of its leader
// epoch, the leader adopts it (adoptStoredStateLocked). On any other
// failure the old ISR stays: after a plain ErrStateConflict, or one whose
// stored state is another leader's or epoch's, the leader's zkVersion is
// stale and every later write fails too until the controller sends a new
// state (Kafka's "Cached zkVersion ... skip updating ISR"). Then, and for
// any other error (an outcome the StateWriter could not resolve), the
// write may have landed: the HW stays bounded by the maximal ISR, with
// ch's members, until a write succeeds or a new state comes.
func (r *Replica) completeIsrChange(ch *isrChange, newZkVersion int32, err error, now time.Time) (changed, expanded bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.isrChangeInFlight = false
	if !r.isLeaderLocked() || r.leaderEpoch != ch.state.LeaderEpoch {
		return false, false // leadership moved on while writing; the new state rules
	}
	if err != nil {
		var sc *StateConflictError
		if errors.As(err, &sc) && r.zkVersion == ch.state.ZkVersion && sc.Stored.ZkVersion > r.zkVersion &&
			sc.Stored.Leader == r.brokerID && sc.Stored.LeaderEpoch == r.leaderEpoch {
			return r.adoptStoredStateLocked(ch, sc.Stored, now)
		}
		ev := r.logger.Warn().Err(err).Ints32("isr", r.isr).Ints32("proposed_isr", ch.state.Isr).
			Int32("zk_version", ch.state.ZkVersion)
		ev = ev.Ints32("maximal_isr", r.maximalIsr)
		if errors.Is(err, ErrStateConflict) {
			ev.Msg("cached zkVersion not equal to that in zookeeper, skip updating ISR")
		} else {
			ev.Msg("ISR write failed, keeping the old ISR and the high watermark within the maximal ISR")
		}
		return false, false
	}
	if newZkVersion <= r.zkVersion {
		return false, false // a newer state arrived meanwhile
	}
	old := r.isr
	r.isr = slices.Clone(ch.state.Isr)
	r.zkVersion = newZkVersion
	r.maximalIsr = nil
	r.maybeIncrementHWLocked(now)
	r.signalLocked()
	r.logger.Info().Ints32("old_isr", old).Ints32("isr", r.isr).Int32("zk_version", newZkVersion).
		Int64("hw", r.hw).Int64("leo", r.log.LogEndOffset()).Msg("ISR updated")
	return true, ch.expand
}

// adoptStoredStateLocked takes stored, read back after ch conflicted, as
// the leader's ISR and zkVersion. The caller checked that stored has this
// broker as leader in its current leader epoch and a zkVersion above the
// one ch (and every write since the last state) was based on. Within a
// leader epoch only its leader writes the state: the controller bumps the
// leader epoch on every state it writes (zkcoord's elections, ISR
// reconciliation on a broker's death, controlled shutdown, preferred
// election all do), so stored is an earlier write of this leader whose
// outcome it never learned (KAFKA-2729: a lost reply) and the znode ISR
// really is stored.Isr. Every write that failed since the last state was
// conditional on the older zkVersion, so none can land any more: the
// maximal ISR is the ISR again, and the change ch wanted is proposed anew
// on the next pass (expiration) or fetch (expansion), conditional on the
// adopted zkVersion. Caller holds r.mu.
func (r *Replica) adoptStoredStateLocked(ch *isrChange, stored cluster.LeaderAndIsr, now time.Time) (changed, expanded bool) {
	old := r.isr
	r.isr = slices.Clone(stored.Isr)
	r.zkVersion = stored.ZkVersion
	r.maximalIsr = nil
	r.maybeIncrementHWLocked(now)
	r.signalLocked()
	r.logger.Warn().Ints32("old_isr", old).Ints32("isr", r.isr).Ints32("proposed_isr", ch.state.Isr).
		Int32("old_zk_version", ch.state.ZkVersion).Int32("zk_version", stored.ZkVersion).
		Int32("controller_epoch", stored.ControllerEpoch).Int64("hw", r.hw).
		Msg("ISR write conflicted with an earlier write of this leader epoch whose reply was lost; adopting the stored ISR")
	changed = !slices.Equal(slices.Sorted(slices.Values(old)), slices.Sorted(slices.Values(r.isr)))
	expanded = slices.ContainsFunc(r.isr, func(id int32) bool { return !slices.Contains(old, id) })
	return changed, changed && expanded
}

// writeIsrChange publishes ch through the StateWriter, holding no replica
// lock across the write, and applies the outcome.
func (m *Manager) writeIsrChange(r *Replica, ch *isrChange) {
	if ch == nil {
		return
	}
	sw := m.cfg.StateWriter
	ctx, cancel := context.WithTimeout(m.ctx, isrWriteTimeout)
	v, err := sw.WriteLeaderAndIsr(ctx, r.tp, ch.state)
	cancel()
	if changed, expanded := r.completeIsrChange(ch, v, err, m.cfg.Now()); changed {
		m.cfg.Metrics.IsrChanged(r.tp, expanded)
		sw.NotifyIsrChange(r.tp)
	}
}

// writeIsrChangeAsync runs writeIsrChange on a goroutine tracked by the
// Manager, so that a follower's fetch does not wait for ZooKeeper. There
// is at most one per partition (isrChangeInFlight). After Close has begun
// the change is dropped as a failed write.
func (m *Manager) writeIsrChangeAsync(r *Replica, ch *isrChange) {
	if ch == nil {
		return
	}
	m.isrWrites.Add(1)
	if !m.goFunc(func() {
		defer m.isrWrites.Done()
		m.writeIsrChange(r, ch)
	}) {
		m.isrWrites.Done()
		r.completeIsrChange(ch, -1, errManagerClosed, m.cfg.Now())
	}
}

// waitIsrWrites waits for the ISR writes writeIsrChangeAsync started.
// Deterministic tests call it after a follower's Read.
func (m *Manager) waitIsrWrites() { m.isrWrites.Wait() }

// maxConcurrentShrinks bounds the ISR shrink writes one expiration pass
// runs at once: in a ZooKeeper outage each may wait isrWriteTimeout, and
// one after another they would stretch a pass to N times that.
const maxConcurrentShrinks = 32

// MaybeShrinkIsr removes, on every partition this broker leads, the ISR
// followers that have not caught up for longer than ReplicaLagTimeMax at
// now, writing the shrinks concurrently (at most maxConcurrentShrinks at
// once), and returns when every write has finished. Its own goroutine
// calls it every ReplicaLagTimeMax/2 (Kafka's isr-expiration task); tests
// call it with an injected time.
func (m *Manager) MaybeShrinkIsr(now time.Time) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxConcurrentShrinks)
	for _, r := range m.all() {
		r.mu.Lock()
		ch := r.maybeShrinkIsrLocked(now)
		r.mu.Unlock()
		if ch == nil {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-m.ctx.Done():
			r.completeIsrChange(ch, -1, errManagerClosed, now)
			continue
		}
		wg.Add(1)
		if !m.goFunc(func() {
			defer wg.Done()
			defer func() { <-sem }()
			m.writeIsrChange(r, ch)
		}) {
			wg.Done()
			<-sem
			r.completeIsrChange(ch, -1, errManagerClosed, now)
		}
	}
	wg.Wait()
}

// untilOutOfSync is Kafka's rule for leaving the ISR, as the time left: a
// follower is out of sync once its LEO differs from the leader's and it
// has not caught up for longer than lag (replica.lag.time.max.ms). It is
// lag while the follower is at the leader's LEO, and below zero once the
// follower is out of sync.
func untilOutOfSync(followerLEO, leaderLEO int64, lastCaughtUp, now time.Time, lag time.Duration) time.Duration {
	if followerLEO == leaderLEO {
		return lag
	}
	return lag - now.Sub(lastCaughtUp)
}
