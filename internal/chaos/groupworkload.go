package chaos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group is the consumer group of the main workload; GroupMembers is how
// many members it has.
const (
	Group        = "chaos-group"
	GroupMembers = 2
)

// GroupCommit is one partition of one OffsetCommit a group member sent.
// Invoke and Complete are monotonic times since the run started.
type GroupCommit struct {
	Group     string
	Member    string
	Partition int32
	Offset    int64
	Invoke    time.Duration
	Complete  time.Duration
	OK        bool // acknowledged (error code 0)
	Err       string
}

// GroupInput is the consumer group's part of CheckInput.
type GroupInput struct {
	Commits []GroupCommit
	// Samples are OffsetFetch answers for the group, each stamped with
	// the time its request was sent (so a sample after an acknowledged
	// commit was asked after it).
	Samples []GroupOffset
	// Final is each member's assignment after the final rebalance, and
	// FinalOffsets the group's committed offsets read after the members
	// left; nil when the run had no group.
	Final        map[string][]int32
	FinalOffsets map[int32]int64
	Partitions   int32
}

// groupMember is one kgo group consumer with manual, synchronous commits:
// each poll's records are recorded, their offsets committed, and only then
// may a rebalance revoke partitions (BlockRebalanceOnPoll), so ownership
// moves only between a commit and the next poll.
type groupMember struct {
	name string
	cl   *kgo.Client
	h    *History

	mu       sync.Mutex
	owned    map[int32]bool
	session  map[int32]int           // assignment session of each owned partition
	assigned map[int32]time.Duration // when it was assigned
	sessions int
}

func newGroupMember(h *History, seeds []string, topic, name string, extra ...kgo.Opt) (*groupMember, error) {
	m := &groupMember{name: name, h: h, owned: map[int32]bool{}, session: map[int32]int{}, assigned: map[int32]time.Duration{}}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("chaos-" + name),
		kgo.ConsumerGroup(Group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(10 * time.Second), kgo.HeartbeatInterval(time.Second),
		kgo.FetchMaxWait(500 * time.Millisecond), kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { m.assign(a[topic]) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { m.revoke(r[topic]) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { m.revoke(r[topic]) })}, extra...)...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	return m, nil
}

func (m *groupMember) assign(ps []int32) {
	at := m.h.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions++
	for _, p := range ps {
		m.owned[p], m.session[p], m.assigned[p] = true, m.sessions, at
	}
}

func (m *groupMember) revoke(ps []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps {
		delete(m.owned, p)
	}
}

// Owned lists the partitions the member owns now.
func (m *groupMember) Owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int32, 0, len(m.owned))
	for p := range m.owned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// run polls, records each partition's records as a Poll whose consumer
// names the member and the partition's assignment session, commits the
// next offsets synchronously and recording each partition's outcome, and
// then lets a pending rebalance proceed.
func (m *groupMember) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		at := m.h.Now()
		m.h.recordRewinds(fs, at, func(p int32) string {
			m.mu.Lock()
			defer m.mu.Unlock()
			return fmt.Sprintf("%s#%d", m.name, m.session[p])
		})
		offsets := map[int32]kgo.EpochOffset{}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			m.mu.Lock()
			sess, assignedAt := m.session[fp.Partition], m.assigned[fp.Partition]
			m.mu.Unlock()
			pl := Poll{Consumer: fmt.Sprintf("%s#%d", m.name, sess), Group: Group, AssignedAt: assignedAt,
				Partition: fp.Partition, At: at, HW: fp.HighWatermark}
			for _, r := range fp.Records {
				pl.Offsets = append(pl.Offsets, r.Offset)
				pl.Values = append(pl.Values, string(r.Value))
			}
			m.h.addPoll(pl)
			last := fp.Records[len(fp.Records)-1]
			offsets[fp.Partition] = kgo.EpochOffset{Epoch: last.LeaderEpoch, Offset: last.Offset + 1}
		})
		if len(offsets) > 0 {
			m.commit(ctx, offsets)
		}
		m.cl.AllowRebalance()
	}
}

func (m *groupMember) commit(ctx context.Context, offsets map[int32]kgo.EpochOffset) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	inv := m.h.Now()
	topic := ""
	for _, t := range m.cl.GetConsumeTopics() {
		topic = t
	}
	m.cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			done := m.h.Now()
			codes := map[int32]int16{}
			if resp != nil {
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						codes[p.Partition] = p.ErrorCode
					}
				}
			}
			for p, eo := range offsets {
				c := GroupCommit{Group: Group, Member: m.name, Partition: p, Offset: eo.Offset, Invoke: inv, Complete: done}
				code, answered := codes[p]
				switch {
				case err != nil:
					c.Err = err.Error()
				case !answered:
					c.Err = "partition missing from the response"
				case code != 0:
					c.Err = fmt.Sprintf("error code %d", code)
				default:
					c.OK = true
				}
				m.h.addCommit(c)
			}
		})
}

// startGroup starts the group's members and an OffsetFetch sampler.
func (w *Workload) startGroup() error {
	for i := 1; i <= GroupMembers; i++ {
		m, err := newGroupMember(w.h, w.c.Seeds(), w.topic, fmt.Sprintf("g%d", i), w.c.clientOpts...)
		if err != nil {
			return err
		}
		w.members = append(w.members, m)
	}
	adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(w.c.Seeds()...), kgo.ClientID("chaos-group-sampler"),
		kgo.RequestTimeoutOverhead(3 * time.Second)}, w.c.clientOpts...)...)
	if err != nil {
		return err
	}
	w.adm = adm
	ctx, cancel := context.WithCancel(context.Background())
	w.groupStop = cancel
	for _, m := range w.members {
		w.groupWG.Add(1)
		go m.run(ctx, &w.groupWG)
	}
	w.groupWG.Add(1)
	go func() {
		defer w.groupWG.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			w.sampleGroup(ctx)
		}
	}()
	return nil
}

// sampleGroup records one OffsetFetch of the group, stamped with the time
// it was sent; it returns the offsets (nil on error).
func (w *Workload) sampleGroup(ctx context.Context) map[int32]int64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	at := w.h.Now()
	resp, err := kadm.NewClient(w.adm).FetchOffsets(ctx, Group)
	if err != nil {
		return nil
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic != w.topic || o.Err != nil {
			return
		}
		out[o.Partition] = o.At
		w.h.addCommitSample(GroupOffset{At: at, Group: Group, Partition: o.Partition, Offset: o.At})
	})
	return out
}

// settleGroup waits (up to timeout) until every partition is owned by
// exactly one member, then records each member's assignment; the checker
// judges what it recorded either way.
func (w *Workload) settleGroup(timeout time.Duration) map[string][]int32 {
	snap := func() (map[string][]int32, bool) {
		out := map[string][]int32{}
		count := map[int32]int{}
		for _, m := range w.members {
			out[m.name] = m.Owned()
			for _, p := range out[m.name] {
				count[p]++
			}
		}
		for p := int32(0); p < w.parts; p++ {
			if count[p] != 1 {
				return out, false
			}
		}
		return out, true
	}
	deadline := time.Now().Add(timeout)
	for {
		out, ok := snap()
		if ok || time.Now().After(deadline) {
			if !ok {
				w.logf("group: no stable assignment within %s: %v", timeout, out)
			}
			return out
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stopGroup settles the group, records the final assignment, stops the
// members (each commits nothing more) and reads the committed offsets.
func (w *Workload) stopGroup() GroupInput {
	if len(w.members) == 0 {
		return GroupInput{}
	}
	final := w.settleGroup(30 * time.Second)
	w.groupStop()
	w.groupWG.Wait()
	for _, m := range w.members {
		m.cl.Close()
	}
	var offs map[int32]int64
	for i := 0; i < 20 && offs == nil; i++ {
		offs = w.sampleGroup(context.Background())
		if offs == nil {
			time.Sleep(500 * time.Millisecond)
		}
	}
	w.adm.Close()
	commits, samples := w.h.groupSnapshot()
	return GroupInput{Commits: commits, Samples: samples, Final: final, FinalOffsets: offs, Partitions: w.parts}
}
