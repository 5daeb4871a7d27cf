package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
)

// hangingBatch is how many partitions one DescribeProducers asks about
// (Kafka's tool's MAX_BATCH_SIZE).
const hangingBatch = 500

// openTxn is one open transaction a partition reports.
type openTxn struct {
	tp cluster.TopicPartition
	p  kmsg.DescribeProducersResponseTopicPartitionActiveProducer
}

func cmdTxnFindHanging(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("transactions find-hanging", `Find hanging transactions (kafka-transactions.sh find-hanging): open transactions on
partitions, older than --max-transaction-timeout, that their coordinator does not know of
(or no longer lists the partition of). Abort them with "transactions abort".`)
	brokerID := f.Int("broker-id", -1, "broker id to search for hanging transactions")
	maxTimeout := f.Int("max-transaction-timeout", 15, "maximum transaction timeout in minutes to limit the scope of the search (15 minutes by default)")
	topic := f.String("topic", "", "topic name to limit search to (required if --partition is specified)")
	partition := f.Int("partition", -1, "partition number")
	if err := f.parse(args); err != nil {
		return err
	}
	if !f.set["topic"] && !f.set["broker-id"] {
		return usageErrorf("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search")
	}
	if f.set["partition"] && !f.set["topic"] {
		return usageErrorf("The --partition argument requires --topic to be provided")
	}
	if f.set["partition"] && (*partition < 0 || *partition > 1<<31-1) {
		return usageErrorf("--partition %d is not a partition number", *partition)
	}
	broker := int32(-1)
	if f.set["broker-id"] {
		broker = int32(*brokerID)
	}
	return withAdmin(ctx, f.target(), []int16{keyDescribeProducers, keyListTransactions, keyDescribeTransactions}, func(ctx context.Context, a *admin) error {
		var tps []cluster.TopicPartition
		if f.set["partition"] {
			tps = []cluster.TopicPartition{{Topic: *topic, Partition: int32(*partition)}}
		} else {
			var err error
			if tps, err = a.partitionsToSearch(ctx, *topic, broker); err != nil {
				return err
			}
		}
		open, err := a.openTxns(ctx, tps, broker, int64(*maxTimeout)*time.Minute.Milliseconds())
		if err != nil {
			return err
		}
		hanging, err := a.hanging(ctx, open)
		if err != nil {
			return err
		}
		now := nowMillis()
		rows := make([][]string, 0, len(hanging))
		for _, h := range hanging {
			rows = append(rows, []string{h.tp.Topic, strconv.Itoa(int(h.tp.Partition)), i64(h.p.ProducerID), strconv.Itoa(int(h.p.ProducerEpoch)),
				strconv.Itoa(int(h.p.CoordinatorEpoch)), i64(h.p.CurrentTxnStartOffset), i64(h.p.LastTimestamp),
				i64((now - h.p.LastTimestamp) / time.Minute.Milliseconds())})
		}
		prettyPrintTable(out, []string{"Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
			"LastTimestamp", "Duration(min)"}, rows)
		return nil
	})
}

// partitionsToSearch is topic's partitions, or every topic's (internal
// ones too) when topic is "", keeping only those with a replica on broker
// unless it is -1.
func (a *admin) partitionsToSearch(ctx context.Context, topic string, broker int32) ([]cluster.TopicPartition, error) {
	var topics []string
	if topic != "" {
		topics = []string{topic}
	}
	md, err := a.adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("Failed to describe topics: %w", err)
	}
	var tps []cluster.TopicPartition
	for _, td := range md.Topics.Sorted() {
		if td.Err != nil {
			return nil, fmt.Errorf("Failed to describe topic %s: %w", td.Topic, td.Err)
		}
		for _, p := range td.Partitions.Sorted() {
			if broker < 0 || slices.Contains(p.Replicas, broker) {
				tps = append(tps, cluster.TopicPartition{Topic: td.Topic, Partition: p.Partition})
			}
		}
	}
	return tps, nil
}

// openTxns asks DescribeProducers, in batches, for the producers of tps
// (on their leaders, or on broker) and keeps the open transactions whose
// producer last wrote more than maxTimeoutMs ago: a younger one may just
// be running.
func (a *admin) openTxns(ctx context.Context, tps []cluster.TopicPartition, broker int32, maxTimeoutMs int64) ([]openTxn, error) {
	var out []openTxn
	for len(tps) > 0 {
		batch := tps[:min(len(tps), hangingBatch)]
		tps = tps[len(batch):]
		req := kmsg.NewPtrDescribeProducersRequest()
		byTopic := map[string]int{}
		for _, tp := range batch {
			i, ok := byTopic[tp.Topic]
			if !ok {
				i = len(req.Topics)
				byTopic[tp.Topic] = i
				rt := kmsg.NewDescribeProducersRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
			}
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, tp.Partition)
		}
		var resps []kmsg.Response
		var errs []error
		if broker >= 0 {
			r, err := a.kcl.Broker(int(broker)).Request(ctx, req)
			resps, errs = append(resps, r), append(errs, err)
		} else {
			for _, s := range a.kcl.RequestSharded(ctx, req) {
				resps, errs = append(resps, s.Resp), append(errs, s.Err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("Failed to describe producers for %d partitions on broker %d: %w", len(batch), broker, err)
		}
		now := nowMillis()
		for _, kr := range resps {
			for _, t := range kr.(*kmsg.DescribeProducersResponse).Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return nil, fmt.Errorf("Failed to describe producers for %s-%d: %w", t.Topic, p.Partition, err)
					}
					for _, ap := range p.ActiveProducers {
						if ap.CurrentTxnStartOffset >= 0 && now-ap.LastTimestamp > maxTimeoutMs {
							out = append(out, openTxn{cluster.TopicPartition{Topic: t.Topic, Partition: p.Partition}, ap})
						}
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(x, y openTxn) int {
		if c := compareTP(x.tp, y.tp); c != 0 {
			return c
		}
		return int(x.p.ProducerID - y.p.ProducerID)
	})
	return out, nil
}

// hanging keeps the open transactions their coordinator does not explain,
// as Kafka's tool decides: no transactional id lists the producer
// (ListTransactions filtered by producer id), the id is no longer
// described (TRANSACTIONAL_ID_NOT_FOUND), or its transaction does not
// include the partition (a coordinator still writing markers lists the
// partitions it has left).
func (a *admin) hanging(ctx context.Context, open []openTxn) ([]openTxn, error) {
	if len(open) == 0 {
		return nil, nil
	}
	var pids []int64
	for _, o := range open {
		if !slices.Contains(pids, o.p.ProducerID) {
			pids = append(pids, o.p.ProducerID)
		}
	}
	listed, err := a.adm.ListTransactions(ctx, pids, nil)
	if err != nil {
		return nil, fmt.Errorf("Failed to list transactions for %d producers: %w", len(pids), err)
	}
	idOf := map[int64]string{}
	listed.Each(func(l kadm.ListedTransaction) {
		if slices.Contains(pids, l.ProducerID) {
			idOf[l.ProducerID] = l.TxnID
		}
	})
	var ids []string
	for _, id := range idOf {
		ids = append(ids, id)
	}
	described := kadm.DescribedTransactions{}
	if len(ids) > 0 {
		if described, err = a.adm.DescribeTransactions(ctx, ids...); err != nil {
			return nil, fmt.Errorf("Failed to describe %d transactions: %w", len(ids), err)
		}
		for _, id := range ids {
			if d, ok := described[id]; ok && d.Err != nil && !errors.Is(d.Err, kerr.TransactionalIDNotFound) {
				return nil, fmt.Errorf("Failed to describe %d transactions: %s: %w", len(ids), id, d.Err)
			}
		}
	}
	var out []openTxn
	for _, o := range open {
		id, ok := idOf[o.p.ProducerID]
		if !ok {
			out = append(out, o)
			continue
		}
		d, ok := described[id]
		if !ok || d.Err != nil {
			out = append(out, o)
			continue
		}
		if _, in := d.Topics[o.tp.Topic][o.tp.Partition]; !in {
			out = append(out, o)
		}
	}
	return out, nil
}
