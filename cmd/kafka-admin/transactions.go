package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const txnAbout = `Analyze the transactional state of producers in the cluster; find and abort hanging
transactions (kafka-transactions.sh).

Usage: kafka-admin transactions COMMAND --bootstrap-server HOST:PORT [flags]
       (or kafka-admin transactions --bootstrap-server HOST:PORT COMMAND [flags], as Kafka's tool)

Commands:
  list                  list transactions [--duration-filter MS]
  describe              describe the state of an active transactional-id: --transactional-id ID
  describe-producers    describe the states of active producers for a topic partition:
                        --topic T --partition P [--broker-id B]
  abort                 abort a hanging transaction: --topic T --partition P and either
                        --start-offset O, or --producer-id, --producer-epoch and --coordinator-epoch
  find-hanging          find hanging transactions: --topic T [--partition P] and/or --broker-id B
                        [--max-transaction-timeout MINUTES]

Run "kafka-admin transactions COMMAND --help" for a command's flags.
`

// The API keys of the transactions commands.
const (
	keyWriteTxnMarkers       = 27
	keyDescribeProducers     = 61
	keyDescribeTransactions  = 65
	keyListTransactions      = 66
	listTxnDurationFilterMin = 1 // ListTransactions version with DurationFilterMillis
)

// nowMillis is the tool's clock (TransactionDurationMs); tests replace it.
var nowMillis = func() int64 { return time.Now().UnixMilli() }

var txnCommands = map[string]subcommand{
	"list":               cmdTxnList,
	"describe":           cmdTxnDescribe,
	"describe-producers": cmdTxnDescribeProducers,
	"abort":              cmdTxnAbort,
	"find-hanging":       cmdTxnFindHanging,
}

// cmdTransactions takes the command wherever it stands among the
// arguments: after "transactions" or after --bootstrap-server, as
// kafka-transactions.sh --bootstrap-server X list has it.
func cmdTransactions(ctx context.Context, args []string, out io.Writer) error {
	name, rest := "", make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--bootstrap-server" || a == "-bootstrap-server":
			rest = append(rest, a)
			if i+1 < len(args) {
				rest = append(rest, args[i+1])
				i++
			}
		case name == "" && !strings.HasPrefix(a, "-"):
			name = a
		default:
			rest = append(rest, a)
		}
	}
	if name == "" {
		if slices.ContainsFunc(rest, func(a string) bool { return a == "-h" || a == "--help" || a == "-help" }) {
			return &helpRequest{usage: txnAbout}
		}
		return usageErrorf("give a command: list, describe, describe-producers, abort or find-hanging")
	}
	cmd, ok := txnCommands[name]
	if !ok {
		return usageErrorf("unknown transactions command %q (list, describe, describe-producers, abort, find-hanging)", name)
	}
	return cmd(ctx, rest, out)
}

// prettyPrintTable prints rows under headers as Kafka's ToolsUtils does:
// each cell padded to its column's width and followed by a tab.
func prettyPrintTable(out io.Writer, headers []string, rows [][]string) {
	widths := make([]int, len(headers))
	for i, h := range headers {
		widths[i] = len(h)
	}
	for _, r := range rows {
		for i := range headers {
			widths[i] = max(widths[i], len(r[i]))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-len(c)))
			b.WriteByte('\t')
		}
		fmt.Fprintln(out, b.String())
	}
	line(headers)
	for _, r := range rows {
		line(r)
	}
}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

func cmdTxnList(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("transactions list", "List transactions (kafka-transactions.sh list).")
	duration := f.Int64("duration-filter", -1, "Duration (in millis) to filter by: if < 0, all transactions will be returned; otherwise, only transactions running longer than this duration will be returned")
	if err := f.parse(args); err != nil {
		return err
	}
	return withAdmin(ctx, f.target(), []int16{keyListTransactions}, func(ctx context.Context, a *admin) error {
		rows, err := a.listTransactions(ctx, *duration)
		if err != nil {
			return fmt.Errorf("Failed to list transactions: %w", err)
		}
		prettyPrintTable(out, []string{"TransactionalId", "Coordinator", "ProducerId", "TransactionState"}, rows)
		return nil
	})
}

// txnListing is one ListTransactions entry and the broker that gave it.
type txnListing struct {
	coordinator int32
	l           kmsg.ListTransactionsResponseTransactionState
}

// listTransactions asks every broker (each coordinates the ids of the
// __transaction_state partitions it leads). A duration filter goes to the
// brokers in ListTransactions v1; a broker serving only v0 would ignore
// it, so against such a cluster the tool filters itself, on the start
// time DescribeTransactions reports.
func (a *admin) listTransactions(ctx context.Context, durationMs int64) ([][]string, error) {
	req := kmsg.NewPtrListTransactionsRequest()
	brokerFilters := true
	if durationMs >= 0 {
		v1, err := a.allServe(ctx, keyListTransactions, listTxnDurationFilterMin)
		if err != nil {
			return nil, err
		}
		brokerFilters = v1
		if v1 {
			req.DurationFilterMillis = durationMs
		}
	}
	type row = txnListing
	var rows []row
	var errs []error
	for _, shard := range a.kcl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", shard.Meta.NodeID, shard.Err))
			continue
		}
		resp := shard.Resp.(*kmsg.ListTransactionsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", shard.Meta.NodeID, err))
			continue
		}
		for _, l := range resp.TransactionStates {
			rows = append(rows, row{shard.Meta.NodeID, l})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rows = a.dedupListings(ctx, rows)
	if !brokerFilters {
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.l.TransactionalID
		}
		described, err := a.adm.DescribeTransactions(ctx, ids...)
		if err != nil && len(ids) > 0 {
			return nil, err
		}
		now := nowMillis()
		rows = slices.DeleteFunc(rows, func(r row) bool { return !runningLonger(described, r.l.TransactionalID, now, durationMs) })
	}
	slices.SortFunc(rows, func(x, y row) int {
		return cmp.Or(cmp.Compare(x.coordinator, y.coordinator), strings.Compare(x.l.TransactionalID, y.l.TransactionalID))
	})
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = []string{r.l.TransactionalID, strconv.Itoa(int(r.coordinator)), i64(r.l.ProducerID), r.l.TransactionState}
	}
	return out, nil
}

// dedupListings keeps one listing per transactional id. Each coordinator
// lists only the ids it coordinates, so ids repeat only where brokers
// share one coordinator's state (kfake answers from every broker) or
// leadership of a __transaction_state partition moved between two
// answers: FindCoordinator then names the one to keep (the lowest broker
// id if it does not answer).
func (a *admin) dedupListings(ctx context.Context, rows []txnListing) []txnListing {
	by := map[string][]int32{}
	for _, r := range rows {
		by[r.l.TransactionalID] = append(by[r.l.TransactionalID], r.coordinator)
	}
	var dups []string
	for id, cs := range by {
		if len(cs) > 1 {
			dups = append(dups, id)
		}
	}
	if len(dups) == 0 {
		return rows
	}
	keep := map[string]int32{}
	for _, id := range dups {
		keep[id] = slices.Min(by[id])
	}
	a.adm.FindTxnCoordinators(ctx, dups...).Each(func(c kadm.FindCoordinatorResponse) {
		if c.Err == nil && slices.Contains(by[c.Name], c.NodeID) {
			keep[c.Name] = c.NodeID
		}
	})
	return slices.DeleteFunc(rows, func(r txnListing) bool {
		k, dup := keep[r.l.TransactionalID]
		return dup && r.coordinator != k
	})
}

// runningLonger is the duration filter of ListTransactions v1 applied by
// the tool, with Kafka's rule (TransactionStateManager): keep id unless
// now - its transaction start time is at most durationMs; a start time of
// -1 (never begun) is thus kept. One that could not be described is left
// out.
func runningLonger(described kadm.DescribedTransactions, id string, now, durationMs int64) bool {
	d, ok := described[id]
	return ok && d.Err == nil && now-d.StartTimestamp > durationMs
}

// allServe reports whether every broker that answers ApiVersions serves
// key at version v or above.
func (a *admin) allServe(ctx context.Context, key, v int16) (bool, error) {
	versions, err := a.adm.ApiVersions(ctx)
	if err != nil {
		return false, fmt.Errorf("ApiVersions: %w", err)
	}
	all := true
	versions.Each(func(bv kadm.BrokerApiVersions) {
		if bv.Err != nil {
			return
		}
		if max, ok := bv.KeyMaxVersion(key); !ok || max < v {
			all = false
		}
	})
	return all, nil
}

func cmdTxnDescribe(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("transactions describe", "Describe the state of an active transactional-id (kafka-transactions.sh describe).")
	id := f.String("transactional-id", "", "REQUIRED: transactional id")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("transactional-id"); err != nil {
		return err
	}
	return withAdmin(ctx, f.target(), []int16{keyDescribeTransactions}, func(ctx context.Context, a *admin) error {
		described, err := a.adm.DescribeTransactions(ctx, *id)
		d, ok := described[*id]
		switch {
		case err != nil:
		case !ok:
			err = errors.New("no answer for it")
		default:
			err = d.Err
		}
		if err != nil {
			return fmt.Errorf("Failed to describe transaction state of transactional-id `%s`: %w", *id, err)
		}
		start, duration := "None", "None"
		if d.StartTimestamp >= 0 {
			start, duration = i64(d.StartTimestamp), i64(nowMillis()-d.StartTimestamp)
		}
		var tps []string
		for _, t := range d.Topics.Sorted() {
			for _, p := range t.Partitions {
				tps = append(tps, fmt.Sprintf("%s-%d", t.Topic, p))
			}
		}
		prettyPrintTable(out, []string{"CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
			"TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"},
			[][]string{{strconv.Itoa(int(d.Coordinator)), *id, i64(d.ProducerID), strconv.Itoa(int(d.ProducerEpoch)), d.State,
				strconv.Itoa(int(d.TimeoutMillis)), start, duration, strings.Join(tps, ",")}})
		return nil
	})
}

// partitionFlags are --topic and --partition, both required.
func partitionFlags(f *flags) (*string, *int) {
	return f.String("topic", "", "REQUIRED: topic name"), f.Int("partition", -1, "REQUIRED: partition number")
}

func checkPartitionFlags(f *flags, partition int) error {
	if err := f.require("topic", "partition"); err != nil {
		return err
	}
	if partition < 0 || partition > 1<<31-1 {
		return usageErrorf("--partition %d is not a partition number", partition)
	}
	return nil
}

func cmdTxnDescribeProducers(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("transactions describe-producers", "Describe the states of active producers for a topic partition (kafka-transactions.sh describe-producers).")
	topic, partition := partitionFlags(f)
	brokerID := f.Int("broker-id", -1, "optional broker id to describe the producer state on a specific replica")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := checkPartitionFlags(f, *partition); err != nil {
		return err
	}
	return withAdmin(ctx, f.target(), []int16{keyDescribeProducers}, func(ctx context.Context, a *admin) error {
		where := "leader"
		broker := int32(-1)
		if f.set["broker-id"] {
			where, broker = fmt.Sprintf("broker %d", *brokerID), int32(*brokerID)
		}
		producers, err := a.describeProducers(ctx, *topic, int32(*partition), broker)
		if err != nil {
			return fmt.Errorf("Failed to describe producers for partition %s-%d on %s: %w", *topic, *partition, where, err)
		}
		rows := make([][]string, 0, len(producers))
		for _, p := range producers {
			start := "None"
			if p.CurrentTxnStartOffset >= 0 {
				start = i64(p.CurrentTxnStartOffset)
			}
			rows = append(rows, []string{i64(p.ProducerID), strconv.Itoa(int(p.ProducerEpoch)), strconv.Itoa(int(p.CoordinatorEpoch)),
				strconv.Itoa(int(p.LastSequence)), i64(p.LastTimestamp), start})
		}
		prettyPrintTable(out, []string{"ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
			"CurrentTransactionStartOffset"}, rows)
		return nil
	})
}

// describeProducers sends DescribeProducers for one partition to its
// leader, or to broker when it is not -1 (a follower answers too), and
// returns the active producers by producer id.
func (a *admin) describeProducers(ctx context.Context, topic string, partition, broker int32) ([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, error) {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	var kresp kmsg.Response
	var err error
	if broker >= 0 {
		kresp, err = a.kcl.Broker(int(broker)).Request(ctx, req)
	} else {
		// kgo sends it to the partition's leader.
		shards := a.kcl.RequestSharded(ctx, req)
		if len(shards) != 1 {
			return nil, fmt.Errorf("DescribeProducers: %d answers", len(shards))
		}
		kresp, err = shards[0].Resp, shards[0].Err
	}
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.DescribeProducersResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic != topic || p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, err
			}
			out := slices.Clone(p.ActiveProducers)
			slices.SortFunc(out, func(x, y kmsg.DescribeProducersResponseTopicPartitionActiveProducer) int {
				return cmp.Compare(x.ProducerID, y.ProducerID)
			})
			return out, nil
		}
	}
	return nil, kerr.UnknownTopicOrPartition
}

// abortSpec is Kafka's AbortTransactionSpec.
type abortSpec struct {
	topic            string
	partition        int32
	producerID       int64
	producerEpoch    int16
	coordinatorEpoch int32
}

func (s abortSpec) String() string {
	return fmt.Sprintf("AbortTransactionSpec(topicPartition=%s-%d, producerId=%d, producerEpoch=%d, coordinatorEpoch=%d)",
		s.topic, s.partition, s.producerID, s.producerEpoch, s.coordinatorEpoch)
}

func cmdTxnAbort(ctx context.Context, args []string, out io.Writer) error {
	f := newFlags("transactions abort", `Abort a hanging transaction (kafka-transactions.sh abort; requires administrative privileges).
For brokers on versions 3.0 and above (this one), only the start offset of the transaction is
required; the tool finds its producer with DescribeProducers. Otherwise give --producer-id,
--producer-epoch and --coordinator-epoch.`)
	topic, partition := partitionFlags(f)
	startOffset := f.Int64("start-offset", -1, "start offset of the transaction to abort")
	producerID := f.Int64("producer-id", -1, "producer id")
	producerEpoch := f.Int("producer-epoch", -1, "producer epoch")
	coordinatorEpoch := f.Int("coordinator-epoch", -1, "coordinator epoch")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := checkPartitionFlags(f, *partition); err != nil {
		return err
	}
	if !f.set["start-offset"] && !f.set["producer-id"] {
		return usageErrorf("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
	}
	spec := abortSpec{topic: *topic, partition: int32(*partition)}
	if !f.set["start-offset"] {
		if !f.set["producer-epoch"] {
			return usageErrorf("Missing required argument --producer-epoch")
		}
		if !f.set["coordinator-epoch"] {
			return usageErrorf("Missing required argument --coordinator-epoch")
		}
		if *producerEpoch < 0 || *producerEpoch > 1<<15-1 {
			return usageErrorf("--producer-epoch %d is not a producer epoch", *producerEpoch)
		}
		// A transaction that hung before its first marker has no
		// coordinator epoch (-1 in DescribeProducers); 0 is at or
		// below any leader epoch, so a marker with it is never fenced
		// as stale by mistake.
		spec.producerID, spec.producerEpoch, spec.coordinatorEpoch = *producerID, int16(*producerEpoch), int32(max(0, *coordinatorEpoch))
	}
	keys := []int16{keyWriteTxnMarkers}
	if f.set["start-offset"] {
		keys = append(keys, keyDescribeProducers)
	}
	return withAdmin(ctx, f.target(), keys, func(ctx context.Context, a *admin) error {
		if f.set["start-offset"] {
			producers, err := a.describeProducers(ctx, spec.topic, spec.partition, -1)
			if err != nil {
				return fmt.Errorf("Failed to validate producer state for partition %s-%d: %w", spec.topic, spec.partition, err)
			}
			i := slices.IndexFunc(producers, func(p kmsg.DescribeProducersResponseTopicPartitionActiveProducer) bool {
				return p.CurrentTxnStartOffset >= 0 && p.CurrentTxnStartOffset == *startOffset
			})
			if i < 0 {
				return fmt.Errorf("Could not find any open transactions starting at offset %d on partition %s-%d", *startOffset, spec.topic, spec.partition)
			}
			p := producers[i]
			spec.producerID, spec.producerEpoch, spec.coordinatorEpoch = p.ProducerID, int16(p.ProducerEpoch), max(0, p.CoordinatorEpoch)
		}
		if err := a.writeAbortMarker(ctx, spec); err != nil {
			return fmt.Errorf("Failed to abort transaction %s: %w", spec, err)
		}
		return nil
	})
}

// writeAbortMarker sends WriteTxnMarkers with one ABORT marker for the
// spec's partition; kgo sends it to the partition's leader, which
// appends the control batch and, with acks=all, answers once it is
// replicated. NOT_LEADER_OR_FOLLOWER and the like are retried after a
// metadata refresh, as Kafka's AbortTransactionHandler does, until ctx.
func (a *admin) writeAbortMarker(ctx context.Context, spec abortSpec) error {
	for {
		err := a.writeAbortMarkerOnce(ctx, spec)
		var ke *kerr.Error
		retriable := errors.As(err, &ke) && (ke == kerr.NotLeaderForPartition || ke == kerr.ReplicaNotAvailable ||
			ke == kerr.BrokerNotAvailable || ke == kerr.UnknownTopicOrPartition)
		if !retriable {
			return err
		}
		a.kcl.ForceMetadataRefresh()
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (a *admin) writeAbortMarkerOnce(ctx context.Context, spec abortSpec) error {
	resp, err := a.adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
		ProducerID: spec.producerID, ProducerEpoch: spec.producerEpoch, CoordinatorEpoch: spec.coordinatorEpoch,
		Commit: false, Topics: kadm.TopicsSet{spec.topic: {spec.partition: struct{}{}}},
	})
	if err != nil {
		var se *kadm.ShardErrors
		if errors.As(err, &se) && len(se.Errs) == 1 {
			return se.Errs[0].Err
		}
		return err
	}
	var found bool
	var perr error
	resp.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
		if p.ProducerID == spec.producerID && p.Topic == spec.topic && p.Partition == spec.partition {
			found, perr = true, p.Err
		}
	})
	if !found {
		return fmt.Errorf("WriteTxnMarkers response has no entry for producer %d on %s-%d", spec.producerID, spec.topic, spec.partition)
	}
	return perr
}
