package group

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/kafkazk/broker/cluster"
)

// state is a group's state in the classic rebalance protocol.
type state int

const (
	stateEmpty state = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s state) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	}
	return "Dead"
}

// newMemberJoinTimeout is how long a new member waiting in its first
// JoinGroup is kept without heartbeats (Kafka's
// GroupCoordinator.NewMemberJoinTimeoutMs).
const newMemberJoinTimeout = 5 * time.Minute

// Protocol is one (name, metadata) pair of a JoinGroup request.
type Protocol struct {
	Name     string
	Metadata []byte
}

type joinReply struct {
	res JoinResult
	err error
}

type syncReply struct {
	res SyncResult
	err error
}

// member is one member of a group. Guarded by Coordinator.mu.
type member struct {
	id               string
	instanceID       *string
	clientID         string
	clientHost       string
	protocols        []Protocol
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	assignment       []byte
	// joinCh is set while the member waits in JoinGroup, syncCh while it
	// waits in SyncGroup; each has room for its one reply.
	joinCh chan joinReply
	syncCh chan syncReply
	// heartbeatDeadline is when the session expires without a heartbeat.
	heartbeatDeadline time.Time
	// isNew: joined in the current rebalance and not yet answered.
	isNew     bool
	joinStart time.Time
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) sameProtocols(ps []Protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b Protocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// alive reports whether the member's session holds at now.
func (m *member) alive(now time.Time) bool {
	switch {
	case m.joinCh != nil:
		return !m.isNew || now.Before(m.joinStart.Add(newMemberJoinTimeout))
	case m.syncCh != nil:
		return true
	}
	return now.Before(m.heartbeatDeadline)
}

// group is one consumer group. Guarded by Coordinator.mu.
type group struct {
	id           string
	partition    int32
	state        state
	stateTime    time.Time // when state last changed
	protocolType string    // "" for a group used only to store offsets
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string    // group.instance.id -> member id
	pending      map[string]time.Time // KIP-394 member ids handed out, until when
	offsets      map[cluster.TopicPartition]Offset
	// appendedAt is, per entry of offsets, the offset in Topic of the
	// commit record behind it (Kafka's appendedBatchOffset): of two
	// commits completing out of order, the one appended later stays.
	appendedAt map[cluster.TopicPartition]int64

	rebalanceDeadline time.Time
	// initialDelay: the rebalance of a group that was empty waits
	// group.initial.rebalance.delay.ms (extended while members keep
	// arriving, up to the rebalance timeout) before completing.
	initialDelay     bool
	newMemberAdded   bool
	initialRemaining time.Duration
	// syncWriting: the leader's assignment is being written.
	syncWriting bool
	// pendingCommits counts, per partition, the commits appended and not
	// yet replicated (Kafka's pendingOffsetCommits): expiry keeps their
	// offsets, and a group with any is not removed.
	pendingCommits map[cluster.TopicPartition]int
	// subscribed is Kafka's GroupMetadata.subscribedTopics: the topics
	// the members of the current generation subscribe to, computed when
	// the generation starts and at load; nil when unknown.
	subscribed map[string]bool
	// txnOffsets are the transactional offsets awaiting their
	// transaction's marker, per producer id (Kafka's
	// pendingTransactionalOffsetCommits), from their append on.
	txnOffsets map[int64]map[cluster.TopicPartition]txnOffset
}

func newGroup(id string, p int32, now time.Time) *group {
	return &group{
		id: id, partition: p, state: stateEmpty, stateTime: now,
		members: map[string]*member{}, static: map[string]string{}, pending: map[string]time.Time{},
		offsets: map[cluster.TopicPartition]Offset{}, appendedAt: map[cluster.TopicPartition]int64{},
		pendingCommits: map[cluster.TopicPartition]int{}, txnOffsets: map[int64]map[cluster.TopicPartition]txnOffset{},
	}
}

func (g *group) transition(s state, now time.Time) {
	g.state = s
	g.stateTime = now
}

// memberOrder lists member ids sorted, for deterministic answers.
func (g *group) memberOrder() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// candidateProtocols are the protocol names every member supports, in the
// first member's order of preference.
func (g *group) candidateProtocols() []string {
	ids := g.memberOrder()
	if len(ids) == 0 {
		return nil
	}
	var out []string
	for _, p := range g.members[ids[0]].protocols {
		all := true
		for _, id := range ids[1:] {
			all = all && g.members[id].metadataFor(p.Name) != nil
		}
		if all {
			out = append(out, p.Name)
		}
	}
	return out
}

// supportsProtocols is Kafka's GroupMetadata.supportsProtocols: an empty
// group takes any non-empty type and protocol list; otherwise the type must
// match and some protocol must be supported by every member.
func (g *group) supportsProtocols(protocolType string, ps []Protocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, c := range g.candidateProtocols() {
		for _, p := range ps {
			if p.Name == c {
				return true
			}
		}
	}
	return false
}

// selectProtocol is the protocol most members prefer among the candidates
// (each votes for its first candidate), ties to the earlier candidate.
func (g *group) selectProtocol() string {
	cands := g.candidateProtocols()
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if slices.Contains(cands, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range cands {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinCh == nil {
			return false
		}
	}
	return true
}

// failWaitersLocked answers m's waiting JoinGroup (with no generation)
// and SyncGroup, if any, with err and forgets them. Caller holds
// Coordinator.mu.
func (m *member) failWaitersLocked(err error) {
	if m.joinCh != nil {
		m.joinCh <- joinReply{res: JoinResult{MemberID: m.id, Generation: -1}, err: err}
		m.joinCh = nil
	}
	m.failSyncLocked(err)
}

// failSyncLocked answers m's waiting SyncGroup, if any, with err and
// forgets it. Caller holds Coordinator.mu.
func (m *member) failSyncLocked(err error) {
	if m.syncCh != nil {
		m.syncCh <- syncReply{err: err}
		m.syncCh = nil
	}
}

// failWaitersLocked answers every member's waiting JoinGroup and SyncGroup
// with err. Caller holds Coordinator.mu.
func (g *group) failWaitersLocked(err error) {
	for _, m := range g.members {
		m.failWaitersLocked(err)
	}
}

// resetAssignmentsLocked is Kafka's resetAndPropagateAssignmentError, for a
// group leaving CompletingRebalance other than to Stable: every member's
// assignment is forgotten and every waiting SyncGroup answered with err.
// Waiting JoinGroups are left alone: a rejoin may be what ends the
// CompletingRebalance. Caller holds Coordinator.mu.
func (g *group) resetAssignmentsLocked(err error) {
	for _, m := range g.members {
		m.assignment = nil
		m.failSyncLocked(err)
	}
}

// isFenced: the request names a known instance id held by another member
// id (Kafka's isStaticMemberFenced).
func (g *group) isFenced(memberID string, instanceID *string) bool {
	if instanceID == nil {
		return false
	}
	cur, ok := g.static[*instanceID]
	return ok && cur != memberID
}

func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", clientID, b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// validateGroupLocked is Kafka's validateGroupStatus for the membership
// APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): they need a
// non-empty group id, and this broker must coordinate the group and have
// loaded its partition. The offset and admin APIs accept an empty group id
// and call checkLocked alone. Caller holds c.mu.
func (c *Coordinator) validateGroupLocked(groupID string) error {
	if groupID == "" {
		return ErrInvalidGroupID
	}
	_, err := c.checkLocked(groupID)
	return err
}

// generationMemberLocked returns the group and the member a SyncGroup or
// Heartbeat comes from, after the checks the two share, in Kafka's order:
// validateGroupLocked's errors; ErrUnknownMemberID for an unknown group;
// ErrFencedInstanceID when the instance id belongs to another member id;
// ErrUnknownMemberID; ErrIllegalGeneration when generation is not the
// group's. Each API then checks the group's state itself, because they
// answer it differently. Caller holds c.mu.
func (c *Coordinator) generationMemberLocked(groupID, memberID string, instanceID *string, generation int32) (*group, *member, error) {
	if err := c.validateGroupLocked(groupID); err != nil {
		return nil, nil, err
	}
	g := c.groups[groupID]
	if g == nil {
		return nil, nil, ErrUnknownMemberID
	}
	if g.isFenced(memberID, instanceID) {
		return nil, nil, ErrFencedInstanceID
	}
	m := g.members[memberID]
	switch {
	case m == nil:
		return nil, nil, ErrUnknownMemberID
	case generation != g.generation:
		return nil, nil, ErrIllegalGeneration
	}
	return g, m, nil
}

// JoinRequest is one JoinGroup.
type JoinRequest struct {
	Group      string
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	// ProtocolType is usually "consumer"; Protocols in preference order.
	ProtocolType     string
	Protocols        []Protocol
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	// RequireKnownMemberID is set for JoinGroup v4+: a first join of a
	// dynamic member gets ErrMemberIDRequired and a member id (KIP-394).
	RequireKnownMemberID bool
}

// JoinMember is one member as the leader sees it in its JoinGroup answer.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

// JoinResult answers a JoinGroup. MemberID is set also with
// ErrMemberIDRequired and ErrUnknownMemberID; Generation is -1 on errors.
type JoinResult struct {
	MemberID     string
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	// Members is set for the leader only.
	Members []JoinMember
}

// JoinGroup joins (or rejoins) a member. It waits, without holding any
// lock, until the rebalance completes, ctx ends, or the partition is
// unloaded (ErrNotCoordinator).
func (c *Coordinator) JoinGroup(ctx context.Context, req JoinRequest) (JoinResult, error) {
	c.mu.Lock()
	ch, res, err := c.joinLocked(req, c.cfg.Now())
	c.mu.Unlock()
	if ch == nil {
		if err != nil && res.MemberID == "" {
			res.MemberID = req.MemberID
		}
		if err != nil {
			res.Generation = -1
		}
		return res, err
	}
	select {
	case r := <-ch:
		return r.res, r.err
	case <-ctx.Done():
		return JoinResult{MemberID: req.MemberID, Generation: -1}, ctx.Err()
	}
}

func (c *Coordinator) joinLocked(req JoinRequest, now time.Time) (chan joinReply, JoinResult, error) {
	if err := c.validateGroupLocked(req.Group); err != nil {
		return nil, JoinResult{}, err
	}
	if req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout {
		return nil, JoinResult{}, fmt.Errorf("%w: %s outside [%s, %s]", ErrInvalidSessionTimeout,
			req.SessionTimeout, c.cfg.MinSessionTimeout, c.cfg.MaxSessionTimeout)
	}
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return nil, JoinResult{}, ErrUnknownMemberID
		}
		g = newGroup(req.Group, c.PartitionFor(req.Group), now)
		c.groups[req.Group] = g
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		return nil, JoinResult{}, ErrInconsistentGroupProtocol
	}
	if req.MemberID == "" {
		return c.joinUnknownLocked(g, req, now)
	}
	return c.joinKnownLocked(g, req, now)
}

func (c *Coordinator) joinUnknownLocked(g *group, req JoinRequest, now time.Time) (chan joinReply, JoinResult, error) {
	id := newMemberID(req.ClientID)
	if req.InstanceID != nil {
		if oldID, ok := g.static[*req.InstanceID]; ok {
			return c.replaceStaticLocked(g, g.members[oldID], id, req, now)
		}
		return c.addMemberLocked(g, id, req, now)
	}
	if req.RequireKnownMemberID {
		g.pending[id] = now.Add(req.SessionTimeout)
		return nil, JoinResult{MemberID: id, Generation: -1}, ErrMemberIDRequired
	}
	return c.addMemberLocked(g, id, req, now)
}

func (c *Coordinator) joinKnownLocked(g *group, req JoinRequest, now time.Time) (chan joinReply, JoinResult, error) {
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		return c.addMemberLocked(g, req.MemberID, req, now)
	}
	if g.isFenced(req.MemberID, req.InstanceID) {
		return nil, JoinResult{}, ErrFencedInstanceID
	}
	m := g.members[req.MemberID]
	if m == nil {
		return nil, JoinResult{}, ErrUnknownMemberID
	}
	switch g.state {
	case statePreparingRebalance:
		return c.updateMemberLocked(g, m, req, now), JoinResult{}, nil
	case stateCompletingRebalance:
		if m.sameProtocols(req.Protocols) {
			// A retried join of this generation: answer it again.
			return nil, c.joinResultLocked(g, m), nil
		}
		return c.updateMemberLocked(g, m, req, now), JoinResult{}, nil
	case stateStable:
		if m.id == g.leader || !m.sameProtocols(req.Protocols) {
			return c.updateMemberLocked(g, m, req, now), JoinResult{}, nil
		}
		return nil, c.joinResultLocked(g, m), nil
	}
	return nil, JoinResult{}, ErrUnknownMemberID
}

// joinResultLocked is the current generation's JoinGroup answer for m.
func (c *Coordinator) joinResultLocked(g *group, m *member) JoinResult {
	res := JoinResult{MemberID: m.id, Generation: g.generation, ProtocolType: g.protocolType,
		Protocol: g.protocol, Leader: g.leader}
	if m.id == g.leader {
		for _, id := range g.memberOrder() {
			o := g.members[id]
			res.Members = append(res.Members, JoinMember{MemberID: o.id, InstanceID: o.instanceID, Metadata: o.metadataFor(g.protocol)})
		}
	}
	return res
}

// replaceStaticLocked gives a static member that rejoined without its
// member id a new one, fencing the old id (KIP-345). A stable group keeps
// its generation and assignment; otherwise the member takes part in the
// rebalance.
func (c *Coordinator) replaceStaticLocked(g *group, old *member, newID string, req JoinRequest, now time.Time) (chan joinReply, JoinResult, error) {
	old.failWaitersLocked(ErrFencedInstanceID)
	delete(g.members, old.id)
	if g.leader == old.id {
		g.leader = newID
	}
	old.id = newID
	g.members[newID] = old
	g.static[*req.InstanceID] = newID
	old.clientID, old.clientHost = req.ClientID, req.ClientHost
	old.sessionTimeout, old.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	if g.state == stateStable && old.sameProtocols(req.Protocols) {
		old.heartbeatDeadline = now.Add(old.sessionTimeout)
		c.writeAsyncLocked(g.partition, []kv{{groupKey(g.id), groupValue(g, now)}}, "static member replaced")
		return nil, c.joinResultLocked(g, old), nil
	}
	return c.updateMemberLocked(g, old, req, now), JoinResult{}, nil
}

func (c *Coordinator) addMemberLocked(g *group, id string, req JoinRequest, now time.Time) (chan joinReply, JoinResult, error) {
	m := &member{
		id: id, instanceID: req.InstanceID, clientID: req.ClientID, clientHost: req.ClientHost,
		protocols: req.Protocols, sessionTimeout: req.SessionTimeout, rebalanceTimeout: req.RebalanceTimeout,
		joinCh: make(chan joinReply, 1), isNew: true, joinStart: now,
	}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	g.members[id] = m
	if req.InstanceID != nil {
		g.static[*req.InstanceID] = id
	}
	if g.leader == "" {
		g.leader = id
	}
	if g.state == statePreparingRebalance && g.initialDelay {
		g.newMemberAdded = true
	}
	ch := m.joinCh // completing the join below clears it
	c.maybePrepareRebalanceLocked(g, now)
	c.tryCompleteJoinLocked(g, now)
	return ch, JoinResult{}, nil
}

func (c *Coordinator) updateMemberLocked(g *group, m *member, req JoinRequest, now time.Time) chan joinReply {
	m.protocols = req.Protocols
	m.sessionTimeout, m.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	// A member that sent a second join (its first connection is gone)
	// takes the answer on the new one.
	m.joinCh = make(chan joinReply, 1)
	m.joinStart = now
	ch := m.joinCh // completing the join below clears it
	c.maybePrepareRebalanceLocked(g, now)
	c.tryCompleteJoinLocked(g, now)
	return ch
}

func (c *Coordinator) maybePrepareRebalanceLocked(g *group, now time.Time) {
	switch g.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		c.prepareRebalanceLocked(g, now)
	}
}

func (c *Coordinator) prepareRebalanceLocked(g *group, now time.Time) {
	if g.state == stateCompletingRebalance {
		g.resetAssignmentsLocked(ErrRebalanceInProgress)
	}
	timeout := g.rebalanceTimeout()
	g.initialDelay = false
	if g.state == stateEmpty && c.cfg.InitialRebalanceDelay > 0 {
		delay := min(c.cfg.InitialRebalanceDelay, timeout)
		g.initialDelay, g.newMemberAdded = true, false
		g.initialRemaining = timeout - delay
		g.rebalanceDeadline = now.Add(delay)
	} else {
		g.rebalanceDeadline = now.Add(timeout)
	}
	g.syncWriting = false
	g.transition(statePreparingRebalance, now)
	c.log.Info().Str("group", g.id).Int32("generation", g.generation).Int("members", len(g.members)).Msg("preparing to rebalance")
	// As Kafka's tryCompleteElseWatch: a group whose members have all
	// (re)joined already, or that has none left, completes at once.
	c.tryCompleteJoinLocked(g, now)
}

func (c *Coordinator) tryCompleteJoinLocked(g *group, now time.Time) {
	if g.state == statePreparingRebalance && !g.initialDelay && g.allJoined() {
		c.completeJoinLocked(g, now)
	}
}

// completeJoinLocked ends the join phase: members that did not rejoin are
// removed, and either the group is empty (a new generation is written) or
// every member gets its JoinGroup answer for the new generation.
func (c *Coordinator) completeJoinLocked(g *group, now time.Time) {
	for _, id := range g.memberOrder() {
		if m := g.members[id]; m.joinCh == nil {
			c.dropMemberLocked(g, m)
		}
	}
	g.initialDelay = false
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.subscribed = g.computeSubscribedTopics()
		g.transition(stateEmpty, now)
		c.log.Info().Str("group", g.id).Int32("generation", g.generation).Msg("group is empty")
		c.writeAsyncLocked(g.partition, []kv{{groupKey(g.id), groupValue(g, now)}}, "empty group")
		return
	}
	g.protocol = g.selectProtocol()
	g.subscribed = g.computeSubscribedTopics()
	if g.members[g.leader] == nil {
		g.leader = g.memberOrder()[0]
	}
	g.transition(stateCompletingRebalance, now)
	c.log.Info().Str("group", g.id).Int32("generation", g.generation).Int("members", len(g.members)).
		Str("protocol", g.protocol).Msg("rebalance: join complete")
	for _, m := range g.members {
		m.joinCh <- joinReply{res: c.joinResultLocked(g, m)}
		m.joinCh = nil
		m.isNew = false
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
	}
}

// dropMemberLocked removes m from g without a state change.
func (c *Coordinator) dropMemberLocked(g *group, m *member) {
	m.failWaitersLocked(ErrUnknownMemberID)
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ids := g.memberOrder(); len(ids) > 0 {
			g.leader = ids[0]
		}
	}
}

// removeMemberLocked removes m (it left or its session expired) and
// rebalances the rest.
func (c *Coordinator) removeMemberLocked(g *group, m *member, now time.Time) {
	c.dropMemberLocked(g, m)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.prepareRebalanceLocked(g, now)
	case statePreparingRebalance:
		c.tryCompleteJoinLocked(g, now)
	}
}

// tickGroupLocked expires pending member ids and sessions and completes a
// rebalance whose deadline passed.
func (c *Coordinator) tickGroupLocked(g *group, now time.Time) {
	for id, until := range g.pending {
		if !now.Before(until) {
			delete(g.pending, id)
		}
	}
	for _, id := range g.memberOrder() {
		m := g.members[id]
		if m != nil && !m.alive(now) {
			c.log.Info().Str("group", g.id).Str("member_id", id).Msg("member session expired")
			c.removeMemberLocked(g, m, now)
		}
	}
	if g.state == statePreparingRebalance && !now.Before(g.rebalanceDeadline) {
		if g.initialDelay && g.newMemberAdded && g.initialRemaining > 0 {
			step := min(c.cfg.InitialRebalanceDelay, g.initialRemaining)
			g.initialRemaining -= step
			g.newMemberAdded = false
			g.rebalanceDeadline = now.Add(step)
			return
		}
		c.completeJoinLocked(g, now)
		return
	}
	c.tryCompleteJoinLocked(g, now)
}

// SyncRequest is one SyncGroup. Assignments is set by the leader only.
type SyncRequest struct {
	Group        string
	Generation   int32
	MemberID     string
	InstanceID   *string
	ProtocolType *string // v5+
	Protocol     *string // v5+
	Assignments  map[string][]byte
}

// SyncResult answers a SyncGroup.
type SyncResult struct {
	ProtocolType string
	Protocol     string
	Assignment   []byte
}

// SyncGroup delivers the leader's assignment. Followers wait for it; the
// leader's write of the group metadata waits for replication.
func (c *Coordinator) SyncGroup(ctx context.Context, req SyncRequest) (SyncResult, error) {
	c.mu.Lock()
	now := c.cfg.Now()
	ch, res, err, write := c.syncLocked(req, now)
	c.mu.Unlock()
	if err != nil || ch == nil {
		return res, err
	}
	if write != nil {
		c.finishSync(req.Group, write)
	}
	select {
	case r := <-ch:
		return r.res, r.err
	case <-ctx.Done():
		return SyncResult{}, ctx.Err()
	}
}

// pendingSync is a leader's assignment being written.
type pendingSync struct {
	g           *group
	generation  int32
	assignments map[string][]byte
	wait        func(context.Context) error
}

func (c *Coordinator) syncLocked(req SyncRequest, now time.Time) (chan syncReply, SyncResult, error, *pendingSync) {
	g, m, err := c.generationMemberLocked(req.Group, req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return nil, SyncResult{}, err, nil
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && *req.Protocol != g.protocol) {
		return nil, SyncResult{}, ErrInconsistentGroupProtocol, nil
	}
	switch g.state {
	case statePreparingRebalance:
		return nil, SyncResult{}, ErrRebalanceInProgress, nil
	case stateStable:
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
		return nil, SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}, nil, nil
	case stateCompletingRebalance:
	default:
		return nil, SyncResult{}, ErrUnknownMemberID, nil
	}
	m.syncCh = make(chan syncReply, 1)
	m.heartbeatDeadline = now.Add(m.sessionTimeout)
	if m.id != g.leader || g.syncWriting {
		return m.syncCh, SyncResult{}, nil, nil
	}
	assignments := make(map[string][]byte, len(g.members))
	for id, m := range g.members {
		a := req.Assignments[id]
		if a == nil {
			a = []byte{}
		}
		assignments[id] = a
		m.assignment = a
	}
	g.syncWriting = true
	wait, _ := c.writeLocked(g.partition, []kv{{groupKey(g.id), groupValue(g, now)}})
	return m.syncCh, SyncResult{}, nil, &pendingSync{g: g, generation: g.generation, assignments: assignments, wait: wait}
}

// finishSync waits for the leader's group metadata write and then either
// hands every member its assignment (the group is Stable) or, if the
// write failed, answers the error and rebalances, as Kafka does.
func (c *Coordinator) finishSync(groupID string, ps *pendingSync) {
	err := ps.wait(c.ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	g := ps.g
	if c.groups[groupID] != g || g.generation != ps.generation || g.state != stateCompletingRebalance || !g.syncWriting {
		return
	}
	g.syncWriting = false
	now := c.cfg.Now()
	if err != nil {
		c.log.Warn().Err(err).Str("group", g.id).Int32("generation", g.generation).Msg("storing the group's assignment failed")
		g.resetAssignmentsLocked(err)
		c.prepareRebalanceLocked(g, now)
		return
	}
	for id, m := range g.members {
		m.assignment = ps.assignments[id]
		if m.assignment == nil {
			m.assignment = []byte{}
		}
		if m.syncCh != nil {
			m.syncCh <- syncReply{res: SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: m.assignment}}
			m.syncCh = nil
		}
	}
	g.transition(stateStable, now)
	c.log.Info().Str("group", g.id).Int32("generation", g.generation).Int("members", len(g.members)).Msg("group stable")
}

// HeartbeatRequest is one Heartbeat.
type HeartbeatRequest struct {
	Group      string
	Generation int32
	MemberID   string
	InstanceID *string
}

// Heartbeat keeps a member's session alive. During a rebalance it answers
// ErrRebalanceInProgress so the member rejoins.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, m, err := c.generationMemberLocked(req.Group, req.MemberID, req.InstanceID, req.Generation)
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	switch g.state {
	case stateCompletingRebalance, stateStable:
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
		return nil
	case statePreparingRebalance:
		m.heartbeatDeadline = now.Add(m.sessionTimeout)
		return ErrRebalanceInProgress
	}
	return ErrUnknownMemberID
}

// LeaveMember is one member of a LeaveGroup (v3+ batches them).
type LeaveMember struct {
	MemberID   string
	InstanceID *string
}

// LeaveGroup removes members; the result has one error (nil on success)
// per member, in order.
func (c *Coordinator) LeaveGroup(groupID string, members []LeaveMember) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.validateGroupLocked(groupID); err != nil {
		return nil, err
	}
	out := make([]error, len(members))
	g := c.groups[groupID]
	now := c.cfg.Now()
	for i, lm := range members {
		if g == nil {
			out[i] = ErrUnknownMemberID
			continue
		}
		if lm.InstanceID != nil {
			cur, ok := g.static[*lm.InstanceID]
			switch {
			case !ok:
				out[i] = ErrUnknownMemberID
			case lm.MemberID != "" && cur != lm.MemberID:
				out[i] = ErrFencedInstanceID
			default:
				c.log.Info().Str("group", g.id).Str("member_id", cur).Msg("static member left")
				c.removeMemberLocked(g, g.members[cur], now)
			}
			continue
		}
		if _, ok := g.pending[lm.MemberID]; ok {
			delete(g.pending, lm.MemberID)
			c.tryCompleteJoinLocked(g, now)
			continue
		}
		m := g.members[lm.MemberID]
		if m == nil {
			out[i] = ErrUnknownMemberID
			continue
		}
		c.log.Info().Str("group", g.id).Str("member_id", m.id).Msg("member left")
		c.removeMemberLocked(g, m, now)
	}
	return out, nil
}
