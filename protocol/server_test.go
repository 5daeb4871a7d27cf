package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/partition"
)

// Tests in this file speak the protocol by hand over a socket, for what
// real clients do not send: bad frames, unsupported versions, acks=0,
// long polls with exact timing, and every key at its min and max version.

func createTopic(t *testing.T, b *testBroker, name string, partitions int32) {
	t.Helper()
	if err := b.cluster.CreateTopic(context.Background(), CreateTopicRequest{Name: name, NumPartitions: partitions, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
}

func TestApiVersions(t *testing.T) {
	b := startBroker(t)
	c := b.dial(t)
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		if len(resp.ApiKeys) != len(supportedAPIs) {
			t.Fatalf("v%d: %d keys, want %d", v, len(resp.ApiKeys), len(supportedAPIs))
		}
		for i, k := range resp.ApiKeys {
			if r := supportedAPIs[i]; k.ApiKey != r.key || k.MinVersion != r.min || k.MaxVersion != r.max {
				t.Errorf("v%d: key %+v, want %+v", v, k, r)
			}
		}
	}

	// v3 with an invalid software name: INVALID_REQUEST, still with the table.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "-bad", "1"
	if resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.ApiKeys) == 0 {
		t.Errorf("bad software name: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

// TestApiVersionsTooNew sends ApiVersions v5 (what kgo opens with) and
// expects UNSUPPORTED_VERSION in a v0 body with no header tags, then the
// connection stays usable for the retry.
func TestApiVersionsTooNew(t *testing.T) {
	b := startBroker(t)
	c := b.dial(t)
	for _, v := range []int16{4, 5, 0x7fff} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kgo", "1"
		corr := c.send(req)
		gotCorr, body, err := c.readFrame(false)
		if err != nil {
			t.Fatal(err)
		}
		if gotCorr != corr {
			t.Fatalf("corr %d want %d", gotCorr, corr)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: not a v0 body: %v", v, err)
		}
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("v%d: error %d, want 35", v, resp.ErrorCode)
		}
		var hasAV bool
		for _, k := range resp.ApiKeys {
			hasAV = hasAV || (k.ApiKey == 18 && k.MaxVersion == 3)
		}
		if !hasAV {
			t.Errorf("v%d: ApiVersions range missing: %+v", v, resp.ApiKeys)
		}
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kgo", "1"
	if resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("retry at v3: %d", resp.ErrorCode)
	}
}

// TestHostileFrames checks that each bad frame closes its own connection
// and nothing else: a second connection keeps working throughout.
func TestHostileFrames(t *testing.T) {
	b := startBroker(t)
	good := b.dial(t)
	metadata := func() {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		if resp := good.roundTrip(req).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
			t.Fatalf("healthy connection: %d brokers", len(resp.Brokers))
		}
	}
	header := func(key, version int16) []byte {
		h := binary.BigEndian.AppendUint16(nil, uint16(key))
		h = binary.BigEndian.AppendUint16(h, uint16(version))
		h = binary.BigEndian.AppendUint32(h, 7)
		h = binary.BigEndian.AppendUint16(h, 1)
		return append(h, 'x')
	}
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	truncatedProduce := encodeRequest(1, "x", produceRequest(7, 1, 1000, "t", 0, makeBatch(0, "a")))
	truncatedProduce = truncatedProduce[:len(truncatedProduce)-30]
	binary.BigEndian.PutUint32(truncatedProduce, uint32(len(truncatedProduce)-4))

	cases := []struct {
		name string
		data []byte
	}{
		{"negative size", []byte{0xff, 0xff, 0xff, 0xff}},
		{"size above max", []byte{0x7f, 0xff, 0xff, 0xff}},
		{"TLS ClientHello", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}},
		{"shorter than header", frame([]byte{0, 3, 0})},
		{"unknown key", frame(header(0x7fff, 0))},
		{"known key not served", frame(header(8, 2))},
		{"produce v2", frame(header(0, 2))},
		{"fetch v13", frame(header(1, 13))},
		{"metadata v10", frame(header(3, 10))},
		{"client id past end", frame([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff})},
		{"truncated body", truncatedProduce},
		{"huge array count", frame(append(header(3, 4), 0x7f, 0xff, 0xff, 0xff, 0))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := b.dial(t)
			if _, err := c.c.Write(tc.data); err != nil {
				t.Fatal(err)
			}
			c.expectClosed()
			metadata()
		})
	}

	// A peer that sends a valid size and then half the body keeps only
	// its own connection waiting.
	c := b.dial(t)
	c.c.Write([]byte{0, 0, 0, 100, 0, 3})
	metadata()
}

func TestProduceAcks(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	c := b.dial(t)

	t.Run("acks=1", func(t *testing.T) {
		for i := int64(0); i < 3; i++ {
			resp := c.roundTrip(produceRequest(9, 1, 1000, "t", 0, makeBatch(0, "a", "b"))).(*kmsg.ProduceResponse)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.BaseOffset != 2*i || p.LogAppendTime != -1 || p.LogStartOffset != 0 {
				t.Fatalf("produce %d: %+v", i, p)
			}
		}
	})
	t.Run("invalid acks", func(t *testing.T) {
		for _, acks := range []int16{2, -5} {
			resp := c.roundTrip(produceRequest(8, acks, 1000, "t", 0, makeBatch(0, "a"))).(*kmsg.ProduceResponse)
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidRequiredAcks.Code || p.ErrorMessage == nil {
				t.Fatalf("acks %d: %+v", acks, p)
			}
		}
	})
	t.Run("null records", func(t *testing.T) {
		resp := c.roundTrip(produceRequest(3, 1, 1000, "t", 0, nil)).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.InvalidRecord.Code {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		resp := c.roundTrip(produceRequest(3, 1, 1000, "t", 0, []byte{1, 2, 3})).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.CorruptMessage.Code {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("unknown partition of known topic", func(t *testing.T) {
		resp := c.roundTrip(produceRequest(3, 1, 1000, "t", 5, makeBatch(0, "a"))).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%+v", p)
		}
	})

	t.Run("acks=all times out while HW is held", func(t *testing.T) {
		b.replicas.setHoldHW(true)
		defer b.replicas.setHoldHW(false)
		start := time.Now()
		resp := c.roundTrip(produceRequest(9, -1, 200, "t", 0, makeBatch(0, "x"))).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.RequestTimedOut.Code {
			t.Fatalf("%+v", p)
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Fatalf("answered after %v, before the 200ms timeout", d)
		}
	})
	t.Run("acks=all completes when HW moves", func(t *testing.T) {
		b.replicas.setHoldHW(true)
		go func() {
			time.Sleep(100 * time.Millisecond)
			b.replicas.setHoldHW(false)
		}()
		resp := c.roundTrip(produceRequest(9, -1, 10000, "t", 0, makeBatch(0, "y"))).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("acks=all parks only its connection", func(t *testing.T) {
		b.replicas.setHoldHW(true)
		defer b.replicas.setHoldHW(false)
		slow := b.dial(t)
		slow.send(produceRequest(9, -1, 2000, "t", 0, makeBatch(0, "z")))
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		c.roundTrip(req)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("other connection waited %v", d)
		}
	})

	t.Run("acks=0 sends no response", func(t *testing.T) {
		c.send(produceRequest(9, 0, 1000, "t", 0, makeBatch(0, "q")))
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 0
		corr := c.send(req)
		gotCorr, _, err := c.readFrame(false)
		if err != nil || gotCorr != corr {
			t.Fatalf("next response has corr %d (%v), want %d: acks=0 was answered", gotCorr, err, corr)
		}
	})
	t.Run("acks=0 failure closes the connection", func(t *testing.T) {
		c0 := b.dial(t)
		c0.send(produceRequest(9, 0, 1000, "t", 0, []byte{1, 2, 3}))
		c0.expectClosed()
	})
}

func TestFetchLongPoll(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	c := b.dial(t)

	t.Run("returns after MaxWait with no data", func(t *testing.T) {
		start := time.Now()
		resp := c.roundTrip(fetchRequest(12, 300, 1, "t", 0, 0)).(*kmsg.FetchResponse)
		if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
			t.Fatalf("answered after %v, want about 300ms", d)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 || resp.SessionID != 0 {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("returns when data arrives", func(t *testing.T) {
		go func() {
			time.Sleep(150 * time.Millisecond)
			b.replicas.Append(cluster.TopicPartition{Topic: "t", Partition: 0}, makeBatch(0, "hello"), 1)
		}()
		start := time.Now()
		resp := c.roundTrip(fetchRequest(11, 5000, 1, "t", 0, 0)).(*kmsg.FetchResponse)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("answered after %v", d)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != 1 || p.LastStableOffset != 1 || p.PreferredReadReplica != -1 {
			t.Fatalf("%+v", p)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(p.RecordBatches); err != nil || rb.NumRecords != 1 {
			t.Fatalf("batch %+v: %v", rb, err)
		}
	})
	t.Run("data above HW is not visible", func(t *testing.T) {
		b.replicas.setHoldHW(true)
		defer b.replicas.setHoldHW(false)
		b.replicas.Append(cluster.TopicPartition{Topic: "t", Partition: 0}, makeBatch(0, "hidden"), 1)
		resp := c.roundTrip(fetchRequest(12, 0, 1, "t", 0, 1)).(*kmsg.FetchResponse)
		if p := resp.Topics[0].Partitions[0]; len(p.RecordBatches) != 0 || p.HighWatermark != 1 {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("errors answer at once", func(t *testing.T) {
		start := time.Now()
		resp := c.roundTrip(fetchRequest(4, 5000, 1, "t", 0, 99)).(*kmsg.FetchResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != -1 {
			t.Fatalf("%+v", p)
		}
		resp = c.roundTrip(fetchRequest(4, 5000, 1, "nope", 0, 0)).(*kmsg.FetchResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%+v", p)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("Close ends a long poll", func(t *testing.T) {
		b2 := startBroker(t)
		createTopic(t, b2, "t", 1)
		c2 := b2.dial(t)
		c2.send(fetchRequest(12, 60000, 1, "t", 0, 0))
		time.Sleep(50 * time.Millisecond)
		done := make(chan struct{})
		go func() { b2.srv.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close blocked by a long poll")
		}
		b2.srv.Close() // safe twice
	})
}

func TestFetchMaxBytes(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 2)
	big := makeBatch(0, string(make([]byte, 1000)))
	for p := int32(0); p < 2; p++ {
		b.replicas.Append(cluster.TopicPartition{Topic: "t", Partition: p}, big, 1)
	}
	req := fetchRequest(12, 0, 1, "t", 0, 0)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	req.MaxBytes = 10 // smaller than one batch
	resp := b.dial(t).roundTrip(req).(*kmsg.FetchResponse)
	ps := resp.Topics[0].Partitions
	if len(ps[0].RecordBatches) != len(big) {
		t.Errorf("first partition: %d bytes, want the whole %d-byte batch", len(ps[0].RecordBatches), len(big))
	}
	if len(ps[1].RecordBatches) != 0 || ps[1].HighWatermark != 1 {
		t.Errorf("second partition over budget: %d bytes, HW %d", len(ps[1].RecordBatches), ps[1].HighWatermark)
	}
}

func TestListOffsets(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	b.replicas.Append(tp, makeBatch(1000, "a", "b"), 1)
	b.replicas.Append(tp, makeBatch(2000, "c"), 1)
	c := b.dial(t)
	list := func(version int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = version
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	if p := list(0, -1); len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 3 {
		t.Errorf("v0 latest: %+v", p)
	}
	if p := list(1, -2); p.Offset != 0 || p.Timestamp != -1 {
		t.Errorf("v1 earliest: %+v", p)
	}
	if p := list(7, 1500); p.Offset != 2 || p.Timestamp != 2000 || p.LeaderEpoch != 0 {
		t.Errorf("v7 by time: %+v", p)
	}
	if p := list(7, 5000); p.Offset != -1 {
		t.Errorf("v7 after last: %+v", p)
	}
}

// TestListOffsetsOffsetNotAvailable: only a consumer's request at v1 or
// later (Kafka's path with an isolation level) can get KIP-207's
// OFFSET_NOT_AVAILABLE; a v0 consumer and any other replica id are
// answered for what they are (partition.OffsetsAsker).
func TestListOffsetsOffsetNotAvailable(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	b.replicas.Append(tp, makeBatch(1000, "a", "b"), 1)
	b.replicas.mu.Lock()
	b.replicas.lagging = true
	b.replicas.mu.Unlock()
	c := b.dial(t)
	list := func(version int16, replicaID int32) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = version, replicaID
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = partition.LatestTimestamp
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	for _, v := range []int16{1, 4, 7} {
		if p := list(v, -1); p.ErrorCode != kerr.OffsetNotAvailable.Code {
			t.Errorf("v%d consumer: error %d, want OFFSET_NOT_AVAILABLE (%d)", v, p.ErrorCode, kerr.OffsetNotAvailable.Code)
		}
		if p := list(v, 2); p.ErrorCode != 0 || p.Offset != 2 {
			t.Errorf("v%d replica 2: %+v, want offset 2", v, p)
		}
	}
	if p := list(0, -1); p.ErrorCode != 0 || len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 2 {
		t.Errorf("v0 consumer: %+v, want offset 2", p)
	}
	list(0, 3)
	b.replicas.mu.Lock()
	got := b.replicas.askers
	b.replicas.mu.Unlock()
	c2, r, l0 := partition.AskerConsumer, partition.AskerReplica, partition.AskerLegacyConsumer
	if want := []partition.OffsetsAsker{c2, r, c2, r, c2, r, l0, r}; !slices.Equal(got, want) {
		t.Errorf("askers %v, want %v (v1/v4/v7 consumer then replica, v0 consumer, v0 replica)", got, want)
	}
}

func TestMetadata(t *testing.T) {
	meta := func(c *rawConn, version int16, allowAuto bool, topics ...string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = version
		req.AllowAutoTopicCreation = allowAuto
		if topics != nil {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		return c.roundTrip(req).(*kmsg.MetadataResponse)
	}

	t.Run("brokers and listener", func(t *testing.T) {
		b := startBroker(t)
		resp := meta(b.dial(t), 9, false, []string{}...)
		if len(resp.Brokers) != 1 || fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port) != b.addr {
			t.Fatalf("brokers %+v, want the PLAINTEXT endpoint %s", resp.Brokers, b.addr)
		}
		if resp.ControllerID != 1 || resp.ClusterID == nil || *resp.ClusterID != "fake-cluster" || len(resp.Topics) != 0 {
			t.Fatalf("%+v", resp)
		}
	})
	t.Run("all topics", func(t *testing.T) {
		b := startBroker(t)
		createTopic(t, b, "a", 1)
		createTopic(t, b, "b", 3)
		c := b.dial(t)
		if resp := meta(c, 9, false); len(resp.Topics) != 2 || len(resp.Topics[1].Partitions) != 3 {
			t.Fatalf("null list: %+v", resp.Topics)
		}
		if resp := meta(c, 0, false, []string{}...); len(resp.Topics) != 2 {
			t.Fatalf("v0 empty list: %+v", resp.Topics)
		}
		if resp := meta(c, 1, false, []string{}...); len(resp.Topics) != 0 {
			t.Fatalf("v1 empty list: %+v", resp.Topics)
		}
		p := meta(c, 7, false, "b").Topics[0].Partitions[2]
		if p.ErrorCode != 0 || p.Leader != 1 || p.LeaderEpoch != 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
			t.Fatalf("partition %+v", p)
		}
	})
	t.Run("auto-creation", func(t *testing.T) {
		b := startBroker(t)
		c := b.dial(t)
		if rt := meta(c, 9, false, "x").Topics[0]; rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("AllowAutoTopicCreation=false: %+v", rt)
		}
		if rt := meta(c, 9, true, "x").Topics[0]; rt.ErrorCode != 0 || len(rt.Partitions) != 2 {
			t.Fatalf("created: %+v", rt)
		}
		if rt := meta(c, 3, false, "y").Topics[0]; rt.ErrorCode != 0 || len(rt.Partitions) != 2 {
			t.Fatalf("v3 always allows creation: %+v", rt)
		}
		if rt := meta(c, 9, true, "bad name").Topics[0]; rt.ErrorCode != kerr.InvalidTopicException.Code {
			t.Fatalf("invalid name: %+v", rt)
		}
		b.cluster.mu.Lock()
		b.cluster.hideNew = true
		b.cluster.mu.Unlock()
		if rt := meta(c, 9, true, "z").Topics[0]; rt.ErrorCode != kerr.LeaderNotAvailable.Code {
			t.Fatalf("not yet visible: %+v", rt)
		}
		b.cluster.reveal()
		if rt := meta(c, 9, true, "z").Topics[0]; rt.ErrorCode != 0 {
			t.Fatalf("visible: %+v", rt)
		}
	})
	t.Run("auto-creation off", func(t *testing.T) {
		b := startBroker(t, withoutAutoCreate())
		if rt := meta(b.dial(t), 9, true, "x").Topics[0]; rt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("%+v", rt)
		}
	})
	t.Run("leader not available", func(t *testing.T) {
		b := startBroker(t)
		createTopic(t, b, "t", 1)
		b.cluster.mu.Lock()
		info := b.cluster.topics["t"]
		info.Partitions[0].State.Leader = 7 // not a live broker
		info.Partitions[0].Replicas = []int32{7, 1}
		b.cluster.mu.Unlock()
		c := b.dial(t)
		if p := meta(c, 9, false, "t").Topics[0].Partitions[0]; p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 || len(p.Replicas) != 2 {
			t.Fatalf("%+v", p)
		}
		if p := meta(c, 0, false, "t").Topics[0].Partitions[0]; p.ErrorCode != kerr.LeaderNotAvailable.Code || len(p.Replicas) != 1 {
			t.Fatalf("v0: %+v", p)
		}
	})
}

func TestInitProducerID(t *testing.T) {
	b := startBroker(t, withoutTransactions())
	c := b.dial(t)
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID != 1001 || resp.ProducerEpoch != 0 {
		t.Fatalf("%+v", resp)
	}
	req.TransactionalID = kmsg.StringPtr("txn")
	if resp := c.roundTrip(req).(*kmsg.InitProducerIDResponse); resp.ErrorCode != kerr.NotCoordinator.Code || resp.ProducerID != -1 {
		t.Fatalf("transactional: %+v", resp)
	}
}

func TestDescribeConfigsBroker(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Version = 4
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeBroker, "1"}, {kmsg.ConfigResourceTypeTopic, "t"}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		rr.ConfigNames = []string{"retention.ms", "no.such"}
		req.Resources = append(req.Resources, rr)
	}
	resp := b.dial(t).roundTrip(req).(*kmsg.DescribeConfigsResponse)
	if r := resp.Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil {
		t.Errorf("broker resource: %+v", r)
	}
	if r := resp.Resources[1]; r.ErrorCode != 0 || len(r.Configs) != 1 || r.Configs[0].Name != "retention.ms" || r.Configs[0].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("filtered topic configs: %+v", r)
	}
}

// TestRoundTripEveryVersion sends every advertised key at its min and
// max version and decodes the answer at that version.
func TestRoundTripEveryVersion(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	for _, r := range supportedAPIs {
		for _, v := range []int16{r.min, r.max} {
			t.Run(fmt.Sprintf("key=%d/v=%d", r.key, v), func(t *testing.T) {
				req := kmsg.RequestForKey(r.key)
				req.SetVersion(v)
				switch req := req.(type) {
				case *kmsg.ProduceRequest:
					*req = *produceRequest(v, 1, 1000, "t", 0, makeBatch(0, "a"))
				case *kmsg.FetchRequest:
					*req = *fetchRequest(v, 0, 0, "t", 0, 0)
				case *kmsg.ApiVersionsRequest:
					req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
				case *kmsg.CreateTopicsRequest:
					ct := kmsg.NewCreateTopicsRequestTopic()
					ct.Topic, ct.NumPartitions, ct.ReplicationFactor = fmt.Sprintf("new-%d", v), 1, 1
					req.Topics = append(req.Topics, ct)
				case *kmsg.DeleteTopicsRequest:
					req.TopicNames = []string{"missing"}
					req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("missing")}}
				}
				resp := b.dial(t).roundTrip(req)
				if resp.Key() != r.key || resp.GetVersion() != v {
					t.Fatalf("response key %d v%d", resp.Key(), resp.GetVersion())
				}
				switch resp := resp.(type) {
				case *kmsg.ProduceResponse:
					if e := resp.Topics[0].Partitions[0].ErrorCode; e != 0 {
						t.Fatalf("produce error %d", e)
					}
				case *kmsg.FetchResponse:
					if e := resp.Topics[0].Partitions[0].ErrorCode; e != 0 {
						t.Fatalf("fetch error %d", e)
					}
				case *kmsg.CreateTopicsResponse:
					if e := resp.Topics[0].ErrorCode; e != 0 {
						t.Fatalf("create error %d", e)
					}
					if v >= 5 && (resp.Topics[0].NumPartitions != 1 || len(resp.Topics[0].Configs) == 0) {
						t.Fatalf("v5+ details missing: %+v", resp.Topics[0])
					}
				case *kmsg.DeleteTopicsResponse:
					if e := resp.Topics[0].ErrorCode; e != kerr.UnknownTopicOrPartition.Code {
						t.Fatalf("delete error %d", e)
					}
				}
			})
		}
	}
}

// TestPipelinedOrder sends many requests without waiting and checks the
// responses come back in request order, while a long poll is among them.
func TestPipelinedOrder(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	c := b.dial(t)
	var want []int32
	for i := 0; i < 20; i++ {
		if i == 5 {
			want = append(want, c.send(fetchRequest(12, 100, 1, "t", 0, 0)))
			continue
		}
		req := kmsg.NewPtrMetadataRequest()
		req.Version = int16(i % 10)
		want = append(want, c.send(req))
	}
	for i, corr := range want {
		got, _, err := c.readFrame(i != 5 && i%10 >= 9 || i == 5)
		if err != nil || got != corr {
			t.Fatalf("response %d: corr %d (%v), want %d", i, got, err, corr)
		}
	}
}

func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "boom", 1)
	createTopic(t, b, "t", 1)
	b.replicas.panicTopic = "boom"
	good := b.dial(t)
	bad := b.dial(t)
	bad.send(fetchRequest(12, 0, 0, "boom", 0, 0))
	bad.expectClosed()
	resp := good.roundTrip(fetchRequest(12, 0, 0, "t", 0, 0)).(*kmsg.FetchResponse)
	if resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal("healthy connection broken")
	}
}

func TestServeAfterClose(t *testing.T) {
	s := NewServer(Config{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(l, "PLAINTEXT"); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCloseWithManyConnections(t *testing.T) {
	b := startBroker(t)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		c := b.dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 9
			c.send(req)
		}()
	}
	wg.Wait()
	b.srv.Close()
}

func TestErrorTable(t *testing.T) {
	log := zerolog.Nop()
	cases := []struct {
		err  error
		want *kerr.Error
	}{
		{partition.ErrNotLeader, kerr.NotLeaderForPartition},
		{fmt.Errorf("append t-0: %w", partition.ErrUnknownTopicOrPartition), kerr.UnknownTopicOrPartition},
		{partition.ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
		{partition.ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
		{partition.ErrRequestTimedOut, kerr.RequestTimedOut},
		{partition.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{partition.ErrCorruptMessage, kerr.CorruptMessage},
		{partition.ErrInvalidRecord, kerr.InvalidRecord},
		{partition.ErrMessageTooLarge, kerr.MessageTooLarge},
		{partition.ErrRecordListTooLarge, kerr.RecordListTooLarge},
		{partition.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{partition.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{partition.ErrUnknownProducerID, kerr.UnknownProducerID},
		{partition.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
		{partition.ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
		{partition.ErrStorage, kerr.KafkaStorageError},
		// As partition wraps a failed fsync of the log (logstore.ErrStorage).
		{fmt.Errorf("append to t-0: %w: %w", partition.ErrStorage, errors.New("fsync /d/t-0/0.log: input/output error")), kerr.KafkaStorageError},
		{cluster.ErrTopicExists, kerr.TopicAlreadyExists},
		{cluster.ErrUnknownTopic, kerr.UnknownTopicOrPartition},
		{cluster.ErrInvalidTopic, kerr.InvalidTopicException},
		{cluster.ErrInvalidPartitions, kerr.InvalidPartitions},
		{cluster.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
		{cluster.ErrInvalidReplicaAssignment, kerr.InvalidReplicaAssignment},
		{fmt.Errorf("%w: bad", cluster.ErrInvalidConfig), kerr.InvalidConfig},
		{cluster.ErrNotController, kerr.NotController},
		{cluster.ErrTopicDeletionDisabled, kerr.TopicDeletionDisabled},
		{fmt.Errorf("x: %w", cluster.ErrStaleControllerEpoch), kerr.StaleControllerEpoch},
		{cluster.ErrStaleBrokerEpoch, kerr.StaleBrokerEpoch},
		{cluster.ErrBrokerNotAvailable, kerr.BrokerNotAvailable},
		{context.DeadlineExceeded, kerr.RequestTimedOut},
		{errors.New("something else"), kerr.UnknownServerError},
	}
	for _, tc := range cases {
		if got := errorCode(&log, tc.err); got != tc.want.Code {
			t.Errorf("%v: code %d, want %s (%d)", tc.err, got, tc.want.Message, tc.want.Code)
		}
	}
	if errorCode(&log, nil) != 0 {
		t.Error("nil error is not 0")
	}
	if got := produceErrorCode(&log, fmt.Errorf("append to t-0: %w", partition.ErrStorage)); got != kerr.KafkaStorageError.Code {
		t.Errorf("produce storage error: %d, want KAFKA_STORAGE_ERROR", got)
	}
	if got := produceErrorCode(&log, errors.New("disk on fire")); got != kerr.RequestTimedOut.Code {
		t.Errorf("unmapped produce error: %d, want REQUEST_TIMED_OUT", got)
	}
}

// TestIncompleteRackInfoIsMapped: CreateTopics or CreatePartitions with
// some brokers racked and some not answers UNKNOWN_SERVER_ERROR with the
// message, as Kafka answers its AdminOperationException, from an explicit
// row: it is not logged as an unclassified error.
func TestIncompleteRackInfoIsMapped(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	err := fmt.Errorf("create topic t: %w", cluster.ErrIncompleteRackInfo)
	if ke := lookupCode(err); ke != kerr.UnknownServerError {
		t.Errorf("lookupCode: %v, want an explicit UNKNOWN_SERVER_ERROR row", ke)
	}
	if got := errorCode(&log, err); got != kerr.UnknownServerError.Code {
		t.Errorf("code %d", got)
	}
	if buf.Len() != 0 {
		t.Errorf("logged as unmapped: %s", buf.String())
	}
}
