package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnWorkloadAgainstKfake runs the transactional workload for a few
// seconds against kfake (which implements transactions, KIP-447 offsets
// and read_committed) without faults and checks its history: the
// positive control of the checker on a real client history, and a test
// that the workload records what the checks need (committed and aborted
// transactions, read_committed reads, group offset samples, a final
// read). It asserts no speed.
func TestTxnWorkloadAgainstKfake(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a workload for several seconds")
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	seeds := kc.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	create := func(topic string, n int32) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := adm.CreateTopic(ctx, n, 3, nil, topic)
		if err == nil {
			err = resp.Err
		}
		return err
	}
	h := NewHistory()
	w, err := StartTxnWorkload(h, seeds, create, Partitions, 1, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	w.StopWriters()
	in, notes := w.Finish(30 * time.Second)
	for _, n := range notes {
		t.Errorf("note: %s", n)
	}
	// The input log, read whole (it is not transactional).
	in.Input = map[int32]map[int64]string{}
	ends := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listed, err := adm.ListEndOffsets(ctx, CTPInput)
	if err != nil {
		t.Fatal(err)
	}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset; in.Input[o.Partition] = map[int64]string{} })
	rc, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(CTPInput), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	for got := func() int64 {
		var n int64
		for _, m := range in.Input {
			n += int64(len(m))
		}
		return n
	}; ; {
		var want int64
		for _, e := range ends {
			want += e
		}
		if got() >= want {
			break
		}
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("input read: %d of %d records", got(), want)
		}
		fs.EachRecord(func(r *kgo.Record) { in.Input[r.Partition][r.Offset] = string(r.Value) })
	}

	res := Check(CheckInput{Txn: in})
	t.Logf("%d transactions: %d committed, %d aborted, %d indeterminate; %d values read under read_committed; %d offset samples",
		res.Txns, res.TxnCommitted, res.TxnAborted, res.TxnInfo, res.TxnPollsSeen, len(in.GroupOffsets))
	if res.Total() != 0 {
		t.Errorf("anomalies against kfake: %+v\n%v", res.TxnAnomalies, res.Examples)
	}
	var ctp, ctpCommitted int
	for _, tx := range in.Txns {
		if tx.Group != "" {
			ctp++
			if tx.committed() {
				ctpCommitted++
			}
		}
	}
	if res.TxnCommitted == 0 || res.TxnAborted == 0 || ctpCommitted == 0 || res.TxnPollsSeen == 0 || len(in.GroupOffsets) == 0 || len(in.Final) == 0 {
		t.Errorf("history too thin to check: %+v, %d consume-transform-produce transactions (%d committed), %d offset samples, %d final polls",
			res.TxnCounts, ctp, ctpCommitted, len(in.GroupOffsets), len(in.Final))
	}
	// The workload records the offsets its acknowledged writes got.
	at := map[string]int64{}
	for _, pl := range in.Final {
		for i, v := range pl.Values {
			at[v] = pl.Offsets[i]
		}
	}
	checked := 0
	for _, tx := range in.Txns {
		for _, wr := range tx.Writes {
			if o, ok := at[wr.Value]; ok && wr.Offset >= 0 {
				checked++
				if o != wr.Offset {
					t.Errorf("%s recorded at %s/%d@%d, read at %d", wr.Value, wr.Topic, wr.Partition, wr.Offset, o)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no write offset recorded")
	}
	// The checker reads this very history: an aborted value put into the
	// final read is caught (the checks are live on real data).
	for _, tx := range in.Txns {
		if !tx.Commit && len(tx.Writes) > 0 {
			wr := tx.Writes[0]
			in.Final = append(in.Final, Poll{Consumer: "final", Topic: wr.Topic, Partition: wr.Partition, Offsets: []int64{1 << 40}, Values: []string{wr.Value}})
			break
		}
	}
	if got := Check(CheckInput{Txn: in}).AbortedRead; got != 1 {
		t.Errorf("injected aborted read counted %d times, want 1", got)
	}
}
