package group

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// at is a commit of offset o without leader epoch or metadata.
func at(o int64) CommitOffset { return CommitOffset{Offset: o, LeaderEpoch: -1} }

func txnReq(groupID string, producerID int64, offs map[cluster.TopicPartition]CommitOffset) TxnCommitRequest {
	return TxnCommitRequest{TransactionalID: "tx", ProducerID: producerID, ProducerEpoch: 0, Group: groupID,
		Generation: -1, Offsets: offs}
}

// txnCommit commits req and fails the test on any error.
func txnCommit(t *testing.T, c *Coordinator, req TxnCommitRequest) {
	t.Helper()
	errs, err := c.CommitTxnOffsets(context.Background(), req)
	if err != nil {
		t.Fatalf("txn commit: %v", err)
	}
	for tp, e := range errs {
		if e != nil {
			t.Fatalf("txn commit %s: %v", tp, e)
		}
	}
	if len(errs) != len(req.Offsets) {
		t.Fatalf("txn commit answered %v for %d partitions", errs, len(req.Offsets))
	}
}

// controlBatch is a v2 control batch of one transaction marker, as
// logstore.BuildControlBatch writes it: attributes 0x30, the producer's id
// and epoch, base sequence -1, key version 0 and type, value version 0 and
// coordinator epoch.
func controlBatch(producerID int64, epoch int16, commit bool) []byte {
	typ := controlAbort
	if commit {
		typ = controlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 5)
	b := buildBatch([]kv{{key, value}}, time.UnixMilli(0))
	binary.BigEndian.PutUint16(b[21:23], uint16(attrTransactional|attrControl))
	binary.BigEndian.PutUint64(b[43:51], uint64(producerID))
	binary.BigEndian.PutUint16(b[51:53], uint16(epoch))
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], castagnoli))
	return b
}

// marker writes producerID's marker to partition p, as WriteTxnMarkers
// does, and tells the coordinator, with the marker's offset, once it is
// in the log. It returns that offset.
func marker(t *testing.T, log *fakeLog, c *Coordinator, p int32, producerID int64, commit bool) int64 {
	t.Helper()
	res, err := log.Append(c.tp(p), controlBatch(producerID, 0, commit), -1)
	if err != nil {
		t.Fatal(err)
	}
	c.CompleteTxn(p, producerID, res.BaseOffset, commit)
	return res.BaseOffset
}

// fetch is FetchOffsets of tps, failing the test on a group error.
func fetch(t *testing.T, c *Coordinator, groupID string, requireStable bool, tps ...cluster.TopicPartition) map[cluster.TopicPartition]Offset {
	t.Helper()
	if len(tps) == 0 {
		tps = nil
	}
	offs, err := c.FetchOffsets(groupID, tps, requireStable)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", groupID, err)
	}
	return offs
}

// wantOffsets checks the committed offsets of groupID, exactly.
func wantOffsets(t *testing.T, c *Coordinator, groupID string, want map[cluster.TopicPartition]int64) {
	t.Helper()
	offs := fetch(t, c, groupID, false)
	if len(offs) != len(want) {
		t.Fatalf("offsets of %s: %v, want %v", groupID, offs, want)
	}
	for tp, o := range want {
		if got, ok := offs[tp]; !ok || got.Offset != o {
			t.Fatalf("offsets of %s: %v, want %v", groupID, offs, want)
		}
	}
}

// unstable reports whether a FetchOffsets with requireStable answers
// UNSTABLE_OFFSET_COMMIT for tp.
func unstable(t *testing.T, c *Coordinator, groupID string, tp cluster.TopicPartition) bool {
	t.Helper()
	o, ok := fetch(t, c, groupID, true, tp)[tp]
	return ok && errors.Is(o.Err, ErrUnstableOffsetCommit)
}

var (
	tp0 = cluster.TopicPartition{Topic: "t", Partition: 0}
	tp1 = cluster.TopicPartition{Topic: "t", Partition: 1}
	tp2 = cluster.TopicPartition{Topic: "t", Partition: 2}
	tp3 = cluster.TopicPartition{Topic: "t", Partition: 3}
	tp4 = cluster.TopicPartition{Topic: "t", Partition: 4}
)

// TestTxnOffsetsPendingUntilCommitMarker: a TxnOffsetCommit writes one
// transactional batch (producer id and epoch, base sequence -1, attribute
// 0x10, the plain commit's record formats) through AppendWith with
// OriginCoordinator and acks -1; its offsets stay invisible, over the
// partition's earlier plain commit, until the producer's COMMIT marker
// (another producer's marker does not complete them); a reload of the
// log agrees.
func TestTxnOffsetsPendingUntilCommitMarker(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	commit(t, c, CommitRequest{Group: "g", Generation: -1, Retention: -1, Offsets: map[cluster.TopicPartition]CommitOffset{tp0: at(1)}})
	from := log.end(p)

	req := txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp0: {Offset: 10, LeaderEpoch: 2, Metadata: "m"}, tp1: at(20)})
	req.ProducerEpoch = 3
	txnCommit(t, c, req)

	log.mu.Lock()
	batches := log.batches[c.tp(p)]
	last := batches[len(batches)-1]
	opts := append([]partition.AppendOptions(nil), log.opts...)
	log.mu.Unlock()
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(last); err != nil {
		t.Fatal(err)
	}
	if rb.Attributes&attrTransactional == 0 || rb.Attributes&attrControl != 0 || rb.ProducerID != 7 ||
		rb.ProducerEpoch != 3 || rb.FirstSequence != -1 || rb.NumRecords != 2 {
		t.Fatalf("transactional batch: attributes %#x producer %d/%d sequence %d records %d", rb.Attributes,
			rb.ProducerID, rb.ProducerEpoch, rb.FirstSequence, rb.NumRecords)
	}
	if len(opts) != 1 || opts[0] != (partition.AppendOptions{Acks: -1, Origin: partition.OriginCoordinator}) {
		t.Fatalf("AppendWith options %+v, want one with acks -1 and OriginCoordinator", opts)
	}
	var recs []logRecord
	for _, r := range log.records(t, p) {
		if r.at >= from {
			recs = append(recs, r)
		}
	}
	wantValue := offsetValue(Offset{Offset: 10, LeaderEpoch: 2, Metadata: "m", CommitTimestamp: clock.Now().UnixMilli(), ExpireTimestamp: -1})
	if len(recs) != 2 || !bytes.Equal(recs[0].key, offsetKey("g", "t", 0)) || !bytes.Equal(recs[0].value, wantValue) ||
		!bytes.Equal(recs[1].key, offsetKey("g", "t", 1)) {
		t.Fatalf("records of the transactional commit: %+v", recs)
	}

	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 1})
	marker(t, log, c, p, 8, true) // another producer's transaction
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 1})

	marker(t, log, c, p, 7, true)
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 10, tp1: 20})
	if o := fetch(t, c, "g", true, tp0)[tp0]; o.Err != nil || o.LeaderEpoch != 2 || o.Metadata != "m" {
		t.Fatalf("committed transactional offset: %+v", o)
	}

	c2 := newTestCoordinator(t, log, clock, -1)
	wantOffsets(t, c2, "g", map[cluster.TopicPartition]int64{tp0: 10, tp1: 20})
}

// TestTxnOffsetsDroppedOnAbort: an ABORT marker drops the producer's
// pending offsets, leaving the earlier plain commit; a reload agrees.
func TestTxnOffsetsDroppedOnAbort(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	commit(t, c, CommitRequest{Group: "g", Generation: -1, Retention: -1, Offsets: map[cluster.TopicPartition]CommitOffset{tp0: at(1)}})
	txnCommit(t, c, txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp0: at(10), tp1: at(20)}))
	marker(t, log, c, p, 7, false)
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 1})
	if unstable(t, c, "g", tp0) || unstable(t, c, "g", tp1) {
		t.Fatal("offsets still pending after the abort")
	}
	// A later COMMIT of the producer (its next transaction, with no
	// offsets here) does not bring them back.
	marker(t, log, c, p, 7, true)
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 1})

	c2 := newTestCoordinator(t, log, clock, -1)
	wantOffsets(t, c2, "g", map[cluster.TopicPartition]int64{tp0: 1})
}

// TestTxnRequireStable: with requireStable a partition with a pending
// transactional offset, or with a plain commit waiting for replication,
// answers UNSTABLE_OFFSET_COMMIT (offset -1) and the others their offset;
// without it the committed offset is answered as before.
func TestTxnRequireStable(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	commit(t, c, CommitRequest{Group: "g", Generation: -1, Retention: -1,
		Offsets: map[cluster.TopicPartition]CommitOffset{tp0: at(1), tp2: at(2)}})
	txnCommit(t, c, txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{tp0: at(10), tp1: at(20)}))

	got := fetch(t, c, "g", true, tp0, tp1, tp2, tp3)
	for _, tp := range []cluster.TopicPartition{tp0, tp1} {
		if o := got[tp]; !errors.Is(o.Err, ErrUnstableOffsetCommit) || o.Offset != -1 {
			t.Fatalf("requireStable %s: %+v, want UNSTABLE_OFFSET_COMMIT", tp, o)
		}
	}
	if o := got[tp2]; o.Err != nil || o.Offset != 2 {
		t.Fatalf("requireStable %s: %+v, want offset 2", tp2, o)
	}
	if _, ok := got[tp3]; ok || len(got) != 3 {
		t.Fatalf("requireStable: %v, want no entry for %s", got, tp3)
	}
	if all := fetch(t, c, "g", true); !errors.Is(all[tp0].Err, ErrUnstableOffsetCommit) || all[tp2].Offset != 2 {
		t.Fatalf("requireStable of all partitions: %v", all)
	}
	if o := fetch(t, c, "g", false, tp0)[tp0]; o.Err != nil || o.Offset != 1 {
		t.Fatalf("without requireStable: %+v, want the committed offset 1", o)
	}

	marker(t, log, c, p, 7, true)
	if o := fetch(t, c, "g", true, tp0)[tp0]; o.Err != nil || o.Offset != 10 {
		t.Fatalf("requireStable after the commit marker: %+v", o)
	}

	// A plain commit waiting for replication is unstable too (Kafka's
	// pendingOffsetCommits).
	open := log.gate(log.end(p))
	done := make(chan error, 1)
	go func() {
		errs, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "g", Generation: -1, Retention: -1,
			Offsets: map[cluster.TopicPartition]CommitOffset{tp2: at(3)}})
		if err == nil {
			err = errs[tp2]
		}
		done <- err
	}()
	waitFor(t, func() bool { return pendingCommits(c, "g") == 1 })
	if !unstable(t, c, "g", tp2) {
		t.Fatal("a plain commit in flight is not unstable")
	}
	open()
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
	if o := fetch(t, c, "g", true, tp2)[tp2]; o.Err != nil || o.Offset != 3 {
		t.Fatalf("requireStable after the plain commit: %+v", o)
	}
}

// joinStatic joins and syncs a one-member group whose member has
// group.instance.id inst: Stable in generation 1. It returns the member
// id.
func joinStatic(t *testing.T, c *Coordinator, groupID, inst string) string {
	t.Helper()
	req := joinReq(groupID, "")
	req.InstanceID = &inst
	req.RequireKnownMemberID = true
	j := recv(t, joinAsync(c, req))
	if j.err != nil {
		t.Fatalf("static join: %v", j.err)
	}
	s := recv(t, syncAsync(t, c, SyncRequest{Group: groupID, Generation: j.res.Generation, MemberID: j.res.MemberID,
		InstanceID: &inst, Assignments: map[string][]byte{j.res.MemberID: {}}}))
	if s.err != nil {
		t.Fatalf("static sync: %v", s.err)
	}
	return j.res.MemberID
}

// TestTxnCommitChecks: Kafka's validateOffsetCommit for a transactional
// commit (KIP-447 from v3): a named member must be the group's and its
// generation the group's; an instance id must map to the member id; a
// request naming neither is accepted even by a Stable group; a group that
// does not exist is created Empty (so a named member is unknown). An
// empty group id and a missing producer id are refused, and a metadata
// string over 4096 bytes fails its partition alone. A refused request
// writes nothing.
func TestTxnCommitChecks(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	m := consumerJoin(t, c, "g", 10*time.Second, "t")
	inst := "i-1"
	sm := joinStatic(t, c, "s", inst)
	other := "i-2"
	offs := map[cluster.TopicPartition]CommitOffset{tp0: at(5)}

	for _, tc := range []struct {
		name string
		req  TxnCommitRequest
		want error
	}{
		{"member of the generation", TxnCommitRequest{Group: "g", Generation: 1, MemberID: m}, nil},
		{"older generation", TxnCommitRequest{Group: "g", Generation: 0, MemberID: m}, ErrIllegalGeneration},
		{"member without generation", TxnCommitRequest{Group: "g", Generation: -1, MemberID: m}, ErrIllegalGeneration},
		{"unknown member", TxnCommitRequest{Group: "g", Generation: 1, MemberID: "nobody"}, ErrUnknownMemberID},
		{"no member, no generation (v0-v2)", TxnCommitRequest{Group: "g", Generation: -1}, nil},
		{"static member", TxnCommitRequest{Group: "s", Generation: 1, MemberID: sm, InstanceID: &inst}, nil},
		{"fenced instance", TxnCommitRequest{Group: "s", Generation: 1, MemberID: "old-id", InstanceID: &inst}, ErrFencedInstanceID},
		{"unknown instance", TxnCommitRequest{Group: "s", Generation: 1, MemberID: sm, InstanceID: &other}, ErrUnknownMemberID},
		{"new group, named member", TxnCommitRequest{Group: "new-1", Generation: 1, MemberID: "x"}, ErrUnknownMemberID},
		{"new group, no member", TxnCommitRequest{Group: "new-2", Generation: -1}, nil},
		{"empty group id", TxnCommitRequest{Group: "", Generation: -1}, ErrInvalidGroupID},
		{"no producer id", TxnCommitRequest{Group: "g", Generation: -1, ProducerID: -1}, ErrInvalidProducerIDMapping},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.TransactionalID, req.Offsets = "tx", offs
			if req.ProducerID == 0 {
				req.ProducerID = 9
			}
			var p int32
			if req.Group != "" {
				p = c.PartitionFor(req.Group)
			}
			before := log.end(p)
			errs, err := c.CommitTxnOffsets(context.Background(), req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CommitTxnOffsets: %v %v, want %v", errs, err, tc.want)
			}
			if tc.want != nil {
				if after := log.end(p); after != before {
					t.Fatalf("a refused commit wrote to the log (%d -> %d)", before, after)
				}
				return
			}
			if errs[tp0] != nil || !unstable(t, c, req.Group, tp0) {
				t.Fatalf("accepted commit: %v, pending %v", errs, unstable(t, c, req.Group, tp0))
			}
			// This request's own batch is in the log and pending for its
			// producer (not an earlier case's of the same group).
			after := log.end(p)
			c.mu.Lock()
			o, ok := c.groups[req.Group].txnOffsets[req.ProducerID][tp0]
			c.mu.Unlock()
			if after <= before || !ok || o.appendedAt != before {
				t.Fatalf("accepted commit: log end %d -> %d, pending of producer %d: %+v %v, want appended at %d",
					before, after, req.ProducerID, o, ok, before)
			}
		})
	}
	for _, id := range []string{"new-1", "new-2"} {
		if d, err := c.DescribeGroup(id); err != nil || d.State != "Empty" {
			t.Fatalf("group %s created by the commit: %+v %v, want Empty", id, d, err)
		}
	}

	errs, err := c.CommitTxnOffsets(context.Background(), txnReq("g", 9,
		map[cluster.TopicPartition]CommitOffset{tp1: at(1), tp2: {Offset: 2, LeaderEpoch: -1, Metadata: strings.Repeat("x", 4097)}}))
	if err != nil || errs[tp1] != nil || !errors.Is(errs[tp2], ErrOffsetMetadataTooLarge) {
		t.Fatalf("commit with a too large metadata: %v %v", errs, err)
	}
	if !unstable(t, c, "g", tp1) || unstable(t, c, "g", tp2) {
		t.Fatal("only the partition with valid metadata should be pending")
	}
}

// TestTxnLoadMarkers: loading a log with transactional batches and
// markers applies a COMMIT's offsets (over an older plain commit, not over
// a newer one), drops an ABORT's, and leaves a transaction with no marker
// yet pending until CompleteTxn; a producer's next transaction after its
// marker stays pending too. A group with only pending offsets and no
// metadata comes back as a storage-only group. A compressed
// transactional batch loads as well.
func TestTxnLoadMarkers(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	probe := New(testCoordinatorConfig(t, log, clock, -1))
	probe.Close()
	p, q := probe.PartitionFor("g"), probe.PartitionFor("only")
	if p == q {
		t.Fatal("test needs g and only in different partitions")
	}
	tpOf := func(part int32) cluster.TopicPartition { return cluster.TopicPartition{Topic: Topic, Partition: part} }
	now := clock.Now()
	off := func(group string, tp cluster.TopicPartition, o int64) kv {
		return kv{offsetKey(group, tp.Topic, tp.Partition), offsetValue(committed(at(o), -1, now))}
	}
	appendTo := func(part int32, b []byte) {
		t.Helper()
		if _, err := log.Append(tpOf(part), b, -1); err != nil {
			t.Fatal(err)
		}
	}
	txnBatch := func(pid int64, codec int8, recs ...kv) []byte {
		t.Helper()
		b, err := encodeTxnBatch(recs, now, codec, pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	appendTo(p, buildBatch([]kv{off("g", tp0, 1), off("g", tp2, 2)}, now))
	appendTo(p, txnBatch(1, codecNone, off("g", tp0, 5), off("g", tp1, 6)))
	appendTo(p, txnBatch(2, codecNone, off("g", tp2, 7)))
	appendTo(p, txnBatch(3, 1, off("g", tp3, 8))) // gzip
	appendTo(p, txnBatch(4, codecNone, off("g", tp4, 9)))
	appendTo(p, buildBatch([]kv{off("g", tp4, 10)}, now)) // newer than producer 4's
	appendTo(p, controlBatch(1, 0, true))
	appendTo(p, controlBatch(2, 0, false))
	appendTo(p, controlBatch(4, 0, true))
	appendTo(p, txnBatch(1, codecNone, off("g", tp1, 60))) // producer 1's next transaction
	appendTo(q, txnBatch(5, codecNone, off("only", tp0, 11)))
	appendTo(q, controlBatch(5, 0, true))
	appendTo(q, txnBatch(6, codecNone, off("only", tp1, 12)))

	c := newTestCoordinator(t, log, clock, -1)
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 5, tp1: 6, tp2: 2, tp4: 10})
	if !unstable(t, c, "g", tp3) || !unstable(t, c, "g", tp1) || unstable(t, c, "g", tp2) || unstable(t, c, "g", tp4) {
		t.Fatal("pending after load: want t-1 (producer 1's next transaction) and t-3 (producer 3, open)")
	}
	wantOffsets(t, c, "only", map[cluster.TopicPartition]int64{tp0: 11})
	if d, _ := c.DescribeGroup("only"); d.State != "Empty" || !unstable(t, c, "only", tp1) {
		t.Fatalf("storage-only group with a pending offset: %+v", d)
	}

	marker(t, log, c, p, 3, true)
	marker(t, log, c, p, 1, true)
	marker(t, log, c, q, 6, false)
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 5, tp1: 60, tp2: 2, tp3: 8, tp4: 10})
	wantOffsets(t, c, "only", map[cluster.TopicPartition]int64{tp0: 11})
	if unstable(t, c, "only", tp1) {
		t.Fatal("aborted offset still pending")
	}
}

// TestTxnCommitOrderAgainstPlainCommits: Kafka's offset-order rule when a
// transactional and a plain commit of one partition mix: at the COMMIT
// marker the one whose record is later in the log stays, whichever
// completes first, and a reload of the log agrees.
func TestTxnCommitOrderAgainstPlainCommits(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	plain := func(tp cluster.TopicPartition, o int64) {
		commit(t, c, CommitRequest{Group: "g", Generation: -1, Retention: -1, Offsets: map[cluster.TopicPartition]CommitOffset{tp: at(o)}})
	}
	// plainAsync commits with its replication held back until release.
	plainAsync := func(tp cluster.TopicPartition, o int64) (release func(), done <-chan error) {
		open := log.gate(log.end(p))
		ch := make(chan error, 1)
		n := pendingCommits(c, "g")
		go func() {
			errs, err := c.CommitOffsets(context.Background(), CommitRequest{Group: "g", Generation: -1, Retention: -1,
				Offsets: map[cluster.TopicPartition]CommitOffset{tp: at(o)}})
			if err == nil {
				err = errs[tp]
			}
			ch <- err
		}()
		waitFor(t, func() bool { return pendingCommits(c, "g") == n+1 })
		return open, ch
	}

	// t-0: transactional, then a later plain commit: the plain one stays.
	txnCommit(t, c, txnReq("g", 1, map[cluster.TopicPartition]CommitOffset{tp0: at(5)}))
	plain(tp0, 7)
	// t-1: plain, then a later transactional one: the transactional one wins.
	plain(tp1, 7)
	txnCommit(t, c, txnReq("g", 1, map[cluster.TopicPartition]CommitOffset{tp1: at(5)}))
	// t-2: transactional, then a later plain commit completing after the
	// marker: the plain one ends up committed.
	txnCommit(t, c, txnReq("g", 1, map[cluster.TopicPartition]CommitOffset{tp2: at(5)}))
	release2, done2 := plainAsync(tp2, 7)
	// t-3: a plain commit appended first and completing after the
	// transactional one's marker: the transactional one stays.
	release3, done3 := plainAsync(tp3, 7)
	txnCommit(t, c, txnReq("g", 1, map[cluster.TopicPartition]CommitOffset{tp3: at(5)}))

	marker(t, log, c, p, 1, true)
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 7, tp1: 5, tp2: 5, tp3: 5})
	release2()
	release3()
	for _, ch := range []<-chan error{done2, done3} {
		if err := recv(t, ch); err != nil {
			t.Fatal(err)
		}
	}
	want := map[cluster.TopicPartition]int64{tp0: 7, tp1: 5, tp2: 7, tp3: 5}
	wantOffsets(t, c, "g", want)

	c2 := newTestCoordinator(t, log, clock, -1)
	wantOffsets(t, c2, "g", want)
}

// TestTxnWriteFailure: a transactional commit whose append fails, or
// whose replication fails, answers the mapped error for every partition
// (a too large metadata keeps its own) and leaves nothing pending: a
// later COMMIT marker of the producer makes nothing visible.
func TestTxnWriteFailure(t *testing.T) {
	for _, tc := range []struct {
		name              string
		appendErr, waitEr error
		want              error
	}{
		{"too few replicas", partition.ErrNotEnoughReplicas, nil, ErrCoordinatorNotAvailable},
		{"not leader", partition.ErrNotLeader, nil, ErrNotCoordinator},
		{"too large", partition.ErrRecordListTooLarge, nil, ErrInvalidCommitOffsetSize},
		{"stale producer epoch", partition.ErrInvalidProducerEpoch, nil, partition.ErrInvalidProducerEpoch},
		{"replication timed out", nil, partition.ErrRequestTimedOut, ErrRequestTimedOut},
		{"leadership lost while waiting", nil, partition.ErrNotLeader, ErrNotCoordinator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1000, 0)}
			log := newFakeLog()
			c := newTestCoordinator(t, log, clock, -1)
			p := c.PartitionFor("g")
			commit(t, c, CommitRequest{Group: "g", Generation: -1, Retention: -1, Offsets: map[cluster.TopicPartition]CommitOffset{tp0: at(1)}})
			log.mu.Lock()
			log.failErr, log.waitErr = tc.appendErr, tc.waitEr
			log.mu.Unlock()
			errs, err := c.CommitTxnOffsets(context.Background(), txnReq("g", 7, map[cluster.TopicPartition]CommitOffset{
				tp0: at(10), tp1: at(20), tp2: {Offset: 1, LeaderEpoch: -1, Metadata: strings.Repeat("x", 4097)}}))
			if err != nil || !errors.Is(errs[tp0], tc.want) || !errors.Is(errs[tp1], tc.want) ||
				!errors.Is(errs[tp2], ErrOffsetMetadataTooLarge) {
				t.Fatalf("CommitTxnOffsets: %v %v, want %v", errs, err, tc.want)
			}
			log.mu.Lock()
			log.failErr, log.waitErr = nil, nil
			log.mu.Unlock()
			if unstable(t, c, "g", tp0) || unstable(t, c, "g", tp1) {
				t.Fatal("a failed write left pending offsets")
			}
			marker(t, log, c, p, 7, true)
			wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 1})
		})
	}
}

// TestTxnUnloadReload: resigning a partition drops its pending offsets
// with its groups (a marker completed meanwhile is left to the next load);
// becoming leader again reloads them from the log: applied where the
// marker is in the log, still pending where it is not. A marker completed
// while the partition loads is applied once the load is done.
func TestTxnUnloadReload(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	p := c.PartitionFor("g")
	txnCommit(t, c, txnReq("g", 1, map[cluster.TopicPartition]CommitOffset{tp0: at(5)}))
	txnCommit(t, c, txnReq("g", 2, map[cluster.TopicPartition]CommitOffset{tp1: at(6)}))

	c.OnBecomeFollower(p)
	c.mu.Lock()
	_, kept := c.groups["g"]
	c.mu.Unlock()
	if kept {
		t.Fatal("group and its pending offsets kept after resigning")
	}
	if _, err := c.FetchOffsets("g", nil, true); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("fetch after resigning: %v", err)
	}
	marker(t, log, c, p, 1, true) // completed here while not led: ignored

	c.OnBecomeLeader(p, 2)
	waitLoaded(t, c)
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 5})
	if !unstable(t, c, "g", tp1) {
		t.Fatal("producer 2's offset not pending after the reload")
	}

	// Resign and lead again, with the load held back by the high
	// watermark; producer 2's marker is completed meanwhile. (It goes in
	// the log only after the load, so that only the deferred completion,
	// not the loader reading on past its end, can apply it.)
	c.OnBecomeFollower(p)
	log.setHold(true)
	if _, err := log.Append(c.tp(p), buildBatch([]kv{{offsetKey("other", "t", 0), offsetValue(committed(at(1), -1, clock.Now()))}}, clock.Now()), -1); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	calls := log.leoCalls
	log.mu.Unlock()
	c.OnBecomeLeader(p, 3)
	waitFor(t, func() bool { log.mu.Lock(); defer log.mu.Unlock(); return log.leoCalls > calls })
	if _, err := c.FetchOffsets("g", nil, false); !errors.Is(err, ErrCoordinatorLoadInProgress) {
		t.Fatalf("fetch while loading: %v", err)
	}
	markerAt := log.end(p) // where the marker goes once the load is done
	c.CompleteTxn(p, 2, markerAt, true)
	log.setHold(false)
	waitLoaded(t, c)
	if res, err := log.Append(c.tp(p), controlBatch(2, 0, true), -1); err != nil || res.BaseOffset != markerAt {
		t.Fatalf("marker at %d, %v; want at %d", res.BaseOffset, err, markerAt)
	}
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 5, tp1: 6})
	if unstable(t, c, "g", tp1) {
		t.Fatal("the marker completed while loading was not applied")
	}
}

// TestTxnExpiryKeepsPendingOffsets: offset expiry keeps an offset with a
// pending transactional offset of its partition and a group holding
// pending offsets (Kafka's OffsetMetadataManager), writing no tombstone
// for them; once the transaction is aborted they expire as usual.
func TestTxnExpiryKeepsPendingOffsets(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newRetentionCoordinator(t, log, clock, time.Hour, time.Minute)
	commit(t, c, CommitRequest{Group: "g", Generation: -1, Retention: -1, Offsets: map[cluster.TopicPartition]CommitOffset{tp0: at(1)}})
	txnCommit(t, c, txnReq("g", 1, map[cluster.TopicPartition]CommitOffset{tp0: at(5), tp1: at(6)}))
	txnCommit(t, c, txnReq("h", 2, map[cluster.TopicPartition]CommitOffset{tp0: at(7)}))
	pg, ph := c.PartitionFor("g"), c.PartitionFor("h")
	fromG, fromH := log.end(pg), log.end(ph)

	clock.Advance(2 * time.Hour)
	c.Tick()
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 1})
	if len(tombstonesAfter(log.records(t, pg), fromG)) != 0 || len(tombstonesAfter(log.records(t, ph), fromH)) != 0 {
		t.Fatal("expiry wrote tombstones for offsets with pending transactional ones")
	}
	for _, id := range []string{"g", "h"} {
		if d, _ := c.DescribeGroup(id); d.State != "Empty" {
			t.Fatalf("group %s with pending offsets: %+v, want kept", id, d)
		}
	}

	marker(t, log, c, pg, 1, false)
	marker(t, log, c, ph, 2, true)
	clock.Advance(time.Minute)
	c.Tick()
	if d, _ := c.DescribeGroup("g"); d.State != "Dead" {
		t.Fatalf("group g after its transaction aborted and its offset expired: %+v", d)
	}
	if !hasKey(tombstonesAfter(log.records(t, pg), fromG), offsetKey("g", "t", 0)) {
		t.Fatal("no tombstone for the expired offset")
	}
	// h's offset was committed by the marker just now (its commit
	// timestamp is the TxnOffsetCommit's, two hours ago: expired too, as
	// Kafka's commit-timestamp rule for a storage-only group).
	if d, _ := c.DescribeGroup("h"); d.State != "Dead" {
		t.Fatalf("group h: %+v", d)
	}
}

// TestTxnDeleteWithPendingOffsets: OffsetDelete of a partition with only
// a pending transactional offset writes its tombstone and drops it, so the
// COMMIT marker does not bring it back, and the group is kept while other
// pending offsets remain; DeleteGroups of an Empty group with pending
// offsets deletes it as Kafka does, with a tombstone for every committed
// and every pending partition, so neither the marker nor a reload brings
// it back.
func TestTxnDeleteWithPendingOffsets(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	log := newFakeLog()
	c := newTestCoordinator(t, log, clock, -1)
	pg, ph := c.PartitionFor("g"), c.PartitionFor("h")

	txnCommit(t, c, txnReq("g", 1, map[cluster.TopicPartition]CommitOffset{tp0: at(5), tp1: at(6)}))
	from := log.end(pg)
	if got := deleteOffsets(t, c, "g", tp1); got[tp1] != nil {
		t.Fatalf("delete offsets: %v", got)
	}
	if tomb := tombstonesAfter(log.records(t, pg), from); len(tomb) != 1 || !bytes.Equal(tomb[0], offsetKey("g", "t", 1)) {
		t.Fatalf("tombstones %x, want t-1's", tomb)
	}
	if unstable(t, c, "g", tp1) || !unstable(t, c, "g", tp0) {
		t.Fatal("after deleting t-1: want t-0 pending only")
	}
	if d, _ := c.DescribeGroup("g"); d.State != "Empty" {
		t.Fatalf("group with a pending offset left: %+v, want kept", d)
	}
	marker(t, log, c, pg, 1, true)
	wantOffsets(t, c, "g", map[cluster.TopicPartition]int64{tp0: 5})

	commit(t, c, CommitRequest{Group: "h", Generation: -1, Retention: -1, Offsets: map[cluster.TopicPartition]CommitOffset{tp0: at(1)}})
	txnCommit(t, c, txnReq("h", 2, map[cluster.TopicPartition]CommitOffset{tp0: at(5), tp1: at(6)}))
	from = log.end(ph)
	if errs := c.DeleteGroups(context.Background(), []string{"h"}); errs["h"] != nil {
		t.Fatalf("delete group with pending offsets: %v", errs)
	}
	tomb := tombstonesAfter(log.records(t, ph), from)
	if len(tomb) != 2 || !hasKey(tomb, offsetKey("h", "t", 0)) || !hasKey(tomb, offsetKey("h", "t", 1)) {
		t.Fatalf("tombstones %x, want t-0's and t-1's", tomb)
	}
	marker(t, log, c, ph, 2, true)
	if d, _ := c.DescribeGroup("h"); d.State != "Dead" || len(fetch(t, c, "h", false)) != 0 {
		t.Fatalf("deleted group after the COMMIT marker: %+v", d)
	}

	c2 := newTestCoordinator(t, log, clock, -1)
	wantOffsets(t, c2, "g", map[cluster.TopicPartition]int64{tp0: 5})
	if d, _ := c2.DescribeGroup("h"); d.State != "Dead" {
		t.Fatalf("deleted group after a reload: %+v", d)
	}
}
