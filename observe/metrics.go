package observe

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/partition"
)

// Partitions is the replica manager's snapshot; partition.Manager
// implements it.
type Partitions interface {
	PartitionStatus() []partition.ReplicaStatus
}

// Controller says whether this broker is the controller and what it sees;
// zkcoord.Session implements it.
type Controller interface {
	IsController() bool
	OfflinePartitionsCount() int
}

// Groups is the group coordinator's committed offsets, for consumer lag;
// group.Coordinator implements it. The lag is measured from what is
// committed, so a transactional commit still pending is not asked to be
// stable (requireStable false): it counts once its marker is written.
type Groups interface {
	ListGroups() ([]group.GroupListing, error)
	FetchOffsets(groupID string, tps []cluster.TopicPartition, requireStable bool) (map[cluster.TopicPartition]group.Offset, error)
}

// fetchOffsets is g's committed offsets of groupID.
func fetchOffsets(g Groups, groupID string) (map[cluster.TopicPartition]group.Offset, error) {
	return g.FetchOffsets(groupID, nil, false)
}

var _ partition.ReassignmentMetrics = (*Observer)(nil)

// ReplicationQuotas is the replication throttles' measured rates;
// partition.Manager implements it.
type ReplicationQuotas interface {
	// ReplicationByteRates is the throttled bytes per second over the
	// quota window, sent as leader and fetched as follower.
	ReplicationByteRates() (leader, follower float64)
	// ReplicationQuotas is leader.replication.throttled.rate and
	// follower.replication.throttled.rate, math.MaxInt64 when unlimited.
	ReplicationQuotas() (leaderRate, followerRate int64)
}

// Cleaner is the log cleaner's figures; partition.Manager implements it.
type Cleaner interface {
	CleanerStatus() partition.CleanerStatus
}

// Config configures an Observer.
type Config struct {
	BrokerID int32
	// ReplicaLagTimeMax is replica.lag.time.max.ms, for the views' "time
	// left before removal from the ISR".
	ReplicaLagTimeMax time.Duration
	// Sources may be given here or later with SetSources.
	Sources Sources
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Sources are what the gauges and views read when scraped. Only
// Partitions is required: without the others the controller gauges read
// 0 and the consumer-group lag and produce purgatory size are not
// exported.
type Sources struct {
	Partitions Partitions
	Controller Controller
	Groups     Groups
	// ProduceWaits is the number of acks=all produces waiting for the HW
	// (partition.Manager.PendingProduceWaits).
	ProduceWaits func() int64
	// Cleaner, if set, gives the log cleaner gauges.
	Cleaner Cleaner
	// Quotas, if set, gives the replication throttle byte rates.
	Quotas ReplicationQuotas
}

// Observer holds the broker's Prometheus registry. It implements
// partition.Metrics, zkcoord.Metrics and protocol.RequestObserver, so
// those packages report events without importing Prometheus; gauges are
// computed from Partitions and Controller when scraped.
type Observer struct {
	cfg Config
	reg *prometheus.Registry

	shrinks, expands       prometheus.Counter
	elections              prometheus.Histogram
	unclean                prometheus.Counter
	bytesIn, messagesIn    *prometheus.CounterVec
	bytesOut, replBytesOut *prometheus.CounterVec
	reassIn, reassOut      prometheus.Counter
	requests               *prometheus.CounterVec
	requestTime            *prometheus.HistogramVec
	inFlight               *prometheus.GaugeVec
	fetchesInFlight        atomic.Int64

	// names caches the request label of each API key.
	namesMu sync.RWMutex
	names   map[int16]string
}

// Metric names, as the common JMX exporters render Kafka's MBeans
// (kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions →
// kafka_server_replicamanager_underreplicatedpartitions).
const (
	mUnderReplicated   = "kafka_server_replicamanager_underreplicatedpartitions"
	mPartitionCount    = "kafka_server_replicamanager_partitioncount"
	mLeaderCount       = "kafka_server_replicamanager_leadercount"
	mReassigning       = "kafka_server_replicamanager_reassigningpartitions"
	mIsrShrinks        = "kafka_server_replicamanager_isrshrinks_total"
	mIsrExpands        = "kafka_server_replicamanager_isrexpands_total"
	mActiveController  = "kafka_controller_kafkacontroller_activecontrollercount"
	mOffline           = "kafka_controller_kafkacontroller_offlinepartitionscount"
	mElections         = "kafka_controller_controllerstats_leaderelectionrateandtimems"
	mUnclean           = "kafka_controller_controllerstats_uncleanleaderelections_total"
	mBytesIn           = "kafka_server_brokertopicmetrics_bytesin_total"
	mMessagesIn        = "kafka_server_brokertopicmetrics_messagesin_total"
	mBytesOut          = "kafka_server_brokertopicmetrics_bytesout_total"
	mReplBytesOut      = "kafka_server_brokertopicmetrics_replicationbytesout_total"
	mReassignIn        = "kafka_server_brokertopicmetrics_reassignmentbytesin_total"
	mReassignOut       = "kafka_server_brokertopicmetrics_reassignmentbytesout_total"
	mRequests          = "kafka_network_requestmetrics_requests_total"
	mRequestTime       = "kafka_network_requestmetrics_totaltimems"
	mInFlight          = "kafka_network_requestmetrics_requestsinflight"
	mPurgatory         = "kafka_server_delayedoperationpurgatory_purgatorysize"
	mFetcherLag        = "kafka_server_fetcherlagmetrics_consumerlag"
	mPartUnder         = "kafka_cluster_partition_underreplicated"
	mPartIsrCount      = "kafka_cluster_partition_insyncreplicascount"
	mPartReplicasCount = "kafka_cluster_partition_replicascount"
	// kafka.cluster:type=Partition,name=LastStableOffsetLag: Kafka has no
	// LastStableOffset gauge of its own (kafka.log:type=Log has
	// LogStartOffset, LogEndOffset, NumLogSegments and Size), only this
	// lag, HW - LSO, for every partition on the broker.
	mPartLSOLag = "kafka_cluster_partition_laststableoffsetlag"
	mLogEnd     = "kafka_log_log_logendoffset"
	mLogStart   = "kafka_log_log_logstartoffset"
	mGroupLag   = "kafka_consumergroup_lag"
	// kafka.log:type=LogCleanerManager,name=... and
	// kafka.log:type=LogCleaner,name=...: the exporters keep the hyphens
	// of these names as underscores.
	mMaxDirtyPercent = "kafka_log_logcleanermanager_max_dirty_percent"
	mUncleanable     = "kafka_log_logcleanermanager_uncleanable_partitions_count"
	mRecopyPercent   = "kafka_log_logcleaner_cleaner_recopy_percent"
	mMaxCleanTime    = "kafka_log_logcleaner_max_clean_time_secs"
	mMaxBufferUtil   = "kafka_log_logcleaner_max_buffer_utilization_percent"
	mDeadThreads     = "kafka_log_logcleaner_deadthreadcount"
	// kafka.server:type=LeaderReplication,name=byte-rate and
	// kafka.server:type=FollowerReplication,name=byte-rate, the
	// ReplicationQuotaManager sensors of KIP-73.
	mLeaderReplRate   = "kafka_server_leaderreplication_byte_rate"
	mFollowerReplRate = "kafka_server_followerreplication_byte_rate"
)

// fetchKey is the Fetch API key.
const fetchKey int16 = 1

// msBuckets are the latency buckets in milliseconds (Kafka's names say ms).
var msBuckets = []float64{0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

// New builds the registry. Nothing runs until Serve.
func New(cfg Config) *Observer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	o := &Observer{cfg: cfg, reg: prometheus.NewRegistry(), names: map[int16]string{}}
	o.shrinks = prometheus.NewCounter(prometheus.CounterOpts{Name: mIsrShrinks,
		Help: "ISR shrinks written by this broker as leader (IsrShrinksPerSec)."})
	o.expands = prometheus.NewCounter(prometheus.CounterOpts{Name: mIsrExpands,
		Help: "ISR expands written by this broker as leader (IsrExpandsPerSec)."})
	o.elections = prometheus.NewHistogram(prometheus.HistogramOpts{Name: mElections,
		Help:    "Controller events that elected new leaders, by how long they took in ms (LeaderElectionRateAndTimeMs); _count is the number of such events.",
		Buckets: msBuckets})
	o.unclean = prometheus.NewCounter(prometheus.CounterOpts{Name: mUnclean,
		Help: "Partitions given a leader from outside their ISR by this broker as controller (UncleanLeaderElectionsPerSec)."})
	o.bytesIn = prometheus.NewCounterVec(prometheus.CounterOpts{Name: mBytesIn,
		Help: "Produced bytes appended as leader (BytesInPerSec)."}, []string{"topic"})
	o.messagesIn = prometheus.NewCounterVec(prometheus.CounterOpts{Name: mMessagesIn,
		Help: "Produced records appended as leader (MessagesInPerSec)."}, []string{"topic"})
	o.bytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: mBytesOut,
		Help: "Bytes returned to consumers' fetches (BytesOutPerSec)."}, []string{"topic"})
	o.replBytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: mReplBytesOut,
		Help: "Bytes returned to followers' fetches (ReplicationBytesOutPerSec)."}, []string{"topic"})
	o.reassIn = prometheus.NewCounter(prometheus.CounterOpts{Name: mReassignIn,
		Help: "Bytes appended here as a follower a reassignment is adding (ReassignmentBytesInPerSec, KIP-573)."})
	o.reassOut = prometheus.NewCounter(prometheus.CounterOpts{Name: mReassignOut,
		Help: "Bytes returned to followers a reassignment is adding (ReassignmentBytesOutPerSec, KIP-573)."})
	o.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: mRequests,
		Help: "Requests handled, by API (RequestsPerSec)."}, []string{"request"})
	o.requestTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: mRequestTime,
		Help:    "Request time in ms from dispatch to response, waits included (TotalTimeMs).",
		Buckets: msBuckets}, []string{"request"})
	o.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: mInFlight,
		Help: "Requests being handled now, by API. This broker has no shared request queue (each connection handles its own requests), so this stands in for RequestQueueSize."},
		[]string{"request"})
	o.reg.MustRegister(o.shrinks, o.expands, o.elections, o.unclean, o.bytesIn, o.messagesIn, o.bytesOut,
		o.replBytesOut, o.reassIn, o.reassOut, o.requests, o.requestTime, o.inFlight, statusCollector{o},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return o
}

// SetSources sets what the gauges and views read. The broker builds its
// Observer before the components it reads (they take its hooks), so it
// calls this once they exist, before Serve.
func (o *Observer) SetSources(src Sources) { o.cfg.Sources = src }

// Registry is the Observer's registry, for tests and extra collectors.
func (o *Observer) Registry() *prometheus.Registry { return o.reg }

// IsrChanged implements partition.Metrics.
func (o *Observer) IsrChanged(_ cluster.TopicPartition, expand bool) {
	if expand {
		o.expands.Inc()
	} else {
		o.shrinks.Inc()
	}
}

// BytesIn implements partition.Metrics.
func (o *Observer) BytesIn(topic string, bytes, messages int64) {
	o.bytesIn.WithLabelValues(topic).Add(float64(bytes))
	o.messagesIn.WithLabelValues(topic).Add(float64(messages))
}

// BytesOut implements partition.Metrics.
func (o *Observer) BytesOut(topic string, bytes int64, replication bool) {
	if replication {
		o.replBytesOut.WithLabelValues(topic).Add(float64(bytes))
	} else {
		o.bytesOut.WithLabelValues(topic).Add(float64(bytes))
	}
}

// ReassignmentBytes implements partition.ReassignmentMetrics.
func (o *Observer) ReassignmentBytes(bytes int64, in bool) {
	if in {
		o.reassIn.Add(float64(bytes))
	} else {
		o.reassOut.Add(float64(bytes))
	}
}

// LeaderElection implements zkcoord.Metrics.
func (o *Observer) LeaderElection(_ int, took time.Duration) {
	o.elections.Observe(float64(took) / float64(time.Millisecond))
}

// UncleanLeaderElection implements zkcoord.Metrics.
func (o *Observer) UncleanLeaderElection(cluster.TopicPartition) { o.unclean.Inc() }

// RequestStart implements protocol.RequestObserver.
func (o *Observer) RequestStart(apiKey int16) {
	if apiKey == fetchKey {
		o.fetchesInFlight.Add(1)
	}
	o.inFlight.WithLabelValues(o.requestName(apiKey)).Inc()
}

// RequestEnd implements protocol.RequestObserver.
func (o *Observer) RequestEnd(apiKey int16, took time.Duration) {
	if apiKey == fetchKey {
		o.fetchesInFlight.Add(-1)
	}
	name := o.requestName(apiKey)
	o.inFlight.WithLabelValues(name).Dec()
	o.requests.WithLabelValues(name).Inc()
	o.requestTime.WithLabelValues(name).Observe(float64(took) / float64(time.Millisecond))
}

// requestName is Kafka's request name for apiKey ("Produce", "Fetch", ...).
func (o *Observer) requestName(apiKey int16) string {
	o.namesMu.RLock()
	n, ok := o.names[apiKey]
	o.namesMu.RUnlock()
	if ok {
		return n
	}
	n = kmsg.NameForKey(apiKey)
	if n == "" || n == "Unknown" {
		n = "ApiKey" + strconv.Itoa(int(apiKey))
	}
	o.namesMu.Lock()
	o.names[apiKey] = n
	o.namesMu.Unlock()
	return n
}

// statusCollector exports the gauges computed from one PartitionStatus
// snapshot per scrape, so partitions that go away leave no stale series.
type statusCollector struct{ o *Observer }

var (
	dUnderReplicated = prometheus.NewDesc(mUnderReplicated, "Partitions led here whose ISR is smaller than AR (UnderReplicatedPartitions).", nil, nil)
	dPartitionCount  = prometheus.NewDesc(mPartitionCount, "Replicas on this broker (PartitionCount).", nil, nil)
	dLeaderCount     = prometheus.NewDesc(mLeaderCount, "Partitions led by this broker (LeaderCount).", nil, nil)
	dReassigning     = prometheus.NewDesc(mReassigning, "Partitions led by this broker whose adding or removing replicas are non-empty (ReassigningPartitions).", nil, nil)
	dActive          = prometheus.NewDesc(mActiveController, "1 on the controller, 0 elsewhere (ActiveControllerCount).", nil, nil)
	dOffline         = prometheus.NewDesc(mOffline, "Partitions without a live leader, as the controller sees them; 0 on other brokers (OfflinePartitionsCount).", nil, nil)
	dPurgatory       = prometheus.NewDesc(mPurgatory, "Requests waiting: Produce = acks=all produces waiting for the HW; Fetch = Fetch requests in progress, nearly all waiting for data (PurgatorySize).", []string{"delayedOperation"}, nil)
	dFetcherLag      = prometheus.NewDesc(mFetcherLag, "On a follower: the leader's HW in its last fetch response minus this replica's LEO (FetcherLagMetrics ConsumerLag).", []string{"topic", "partition"}, nil)
	dPartUnder       = prometheus.NewDesc(mPartUnder, "1 if this broker leads the partition and its ISR is smaller than AR (Partition UnderReplicated).", []string{"topic", "partition"}, nil)
	dPartIsr         = prometheus.NewDesc(mPartIsrCount, "ISR size, on the leader (Partition InSyncReplicasCount).", []string{"topic", "partition"}, nil)
	dPartReplicas    = prometheus.NewDesc(mPartReplicasCount, "AR size, on the leader (Partition ReplicasCount).", []string{"topic", "partition"}, nil)
	dPartLSOLag      = prometheus.NewDesc(mPartLSOLag, "HW minus LSO of this replica: how far open transactions hold read_committed consumers back (Partition LastStableOffsetLag).", []string{"topic", "partition"}, nil)
	dLogEnd          = prometheus.NewDesc(mLogEnd, "This replica's log end offset (Log LogEndOffset).", []string{"topic", "partition"}, nil)
	dLogStart        = prometheus.NewDesc(mLogStart, "This replica's log start offset (Log LogStartOffset).", []string{"topic", "partition"}, nil)
	dMaxDirty        = prometheus.NewDesc(mMaxDirtyPercent, "100 times the largest dirty ratio of the compacted logs at the cleaner's last scan (LogCleanerManager max-dirty-percent).", nil, nil)
	dUncleanable     = prometheus.NewDesc(mUncleanable, "Partitions the cleaner failed on and no longer cleans, per log dir (LogCleanerManager uncleanable-partitions-count).", []string{"logDirectory"}, nil)
	dRecopy          = prometheus.NewDesc(mRecopyPercent, "100 times bytes written over bytes read by each cleaner thread's last pass (LogCleaner cleaner-recopy-percent).", nil, nil)
	dMaxCleanTime    = prometheus.NewDesc(mMaxCleanTime, "The longest of the cleaner threads' last passes, in seconds (LogCleaner max-clean-time-secs).", nil, nil)
	dMaxBufferUtil   = prometheus.NewDesc(mMaxBufferUtil, "The largest offset map use of the cleaner threads' last passes, in percent (LogCleaner max-buffer-utilization-percent).", nil, nil)
	dDeadThreads     = prometheus.NewDesc(mDeadThreads, "Cleaner threads that died (LogCleaner DeadThreadCount).", nil, nil)
	dGroupLag        = prometheus.NewDesc(mGroupLag, "For groups coordinated here: the HW of this broker's replica of the partition minus the group's committed offset (kafka_exporter's kafka_consumergroup_lag); partitions with no replica here are left out.", []string{"consumergroup", "topic", "partition"}, nil)
)

// The replication throttles' gauges.
var (
	dLeaderReplRate   = prometheus.NewDesc(mLeaderReplRate, "Bytes per second sent to followers of leader-throttled replicas (leader.replication.throttled.replicas), over the quota window of 11 samples of 1 s (LeaderReplication byte-rate).", nil, nil)
	dFollowerReplRate = prometheus.NewDesc(mFollowerReplRate, "Bytes per second fetched for follower-throttled replicas (follower.replication.throttled.replicas), over the quota window of 11 samples of 1 s (FollowerReplication byte-rate).", nil, nil)
)

func (statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dUnderReplicated, dPartitionCount, dLeaderCount, dReassigning, dActive, dOffline,
		dPurgatory, dFetcherLag, dPartUnder, dPartIsr, dPartReplicas, dPartLSOLag, dLogEnd, dLogStart, dGroupLag,
		dMaxDirty, dUncleanable, dRecopy, dMaxCleanTime, dMaxBufferUtil, dDeadThreads,
		dLeaderReplRate, dFollowerReplRate} {
		ch <- d
	}
}

func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	o := c.o
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	var sts []partition.ReplicaStatus
	if o.cfg.Sources.Partitions != nil {
		sts = o.cfg.Sources.Partitions.PartitionStatus()
	}
	under, leaders, reassigning := 0, 0, 0
	hws := make(map[cluster.TopicPartition]int64, len(sts))
	for _, st := range sts {
		tp := st.TopicPartition
		t, p := tp.Topic, strconv.Itoa(int(tp.Partition))
		hws[tp] = st.HighWatermark
		gauge(dLogEnd, float64(st.LogEndOffset), t, p)
		gauge(dLogStart, float64(st.LogStartOffset), t, p)
		gauge(dPartLSOLag, float64(max(0, st.HighWatermark-st.LastStableOffset)), t, p)
		if st.Role == partition.RoleLeader {
			leaders++
			if len(st.AddingReplicas)+len(st.RemovingReplicas) > 0 {
				reassigning++
			}
			u := 0.0
			if underReplicated(st) {
				under++
				u = 1
			}
			gauge(dPartUnder, u, t, p)
			gauge(dPartIsr, float64(len(st.Isr)), t, p)
			gauge(dPartReplicas, float64(len(st.Replicas)), t, p)
		} else if st.LeaderHighWatermark >= 0 {
			gauge(dFetcherLag, float64(max(0, st.LeaderHighWatermark-st.LogEndOffset)), t, p)
		}
	}
	gauge(dUnderReplicated, float64(under))
	gauge(dPartitionCount, float64(len(sts)))
	gauge(dLeaderCount, float64(leaders))
	gauge(dReassigning, float64(reassigning))
	active, offline := 0.0, 0.0
	if o.cfg.Sources.Controller != nil && o.cfg.Sources.Controller.IsController() {
		active, offline = 1, float64(o.cfg.Sources.Controller.OfflinePartitionsCount())
	}
	gauge(dActive, active)
	gauge(dOffline, offline)
	if o.cfg.Sources.ProduceWaits != nil {
		gauge(dPurgatory, float64(o.cfg.Sources.ProduceWaits()), "Produce")
	}
	gauge(dPurgatory, float64(o.fetchesInFlight.Load()), "Fetch")
	if o.cfg.Sources.Groups != nil {
		o.collectGroupLag(hws, gauge)
	}
	if o.cfg.Sources.Quotas != nil {
		l, f := o.cfg.Sources.Quotas.ReplicationByteRates()
		gauge(dLeaderReplRate, l)
		gauge(dFollowerReplRate, f)
	}
	if o.cfg.Sources.Cleaner != nil {
		cs := o.cfg.Sources.Cleaner.CleanerStatus()
		gauge(dMaxDirty, float64(cs.MaxDirtyPercent))
		gauge(dRecopy, float64(cs.RecopyPercent))
		gauge(dMaxCleanTime, float64(cs.MaxCleanTimeSecs))
		gauge(dMaxBufferUtil, float64(cs.MaxBufferUtilizationPercent))
		gauge(dDeadThreads, float64(cs.DeadThreadCount))
		for dir, n := range cs.Uncleanable {
			gauge(dUncleanable, float64(n), dir)
		}
	}
}

// collectGroupLag exports the lag of every group coordinated here. A
// coordinator still loading returns what it has loaded.
func (o *Observer) collectGroupLag(hws map[cluster.TopicPartition]int64, gauge func(*prometheus.Desc, float64, ...string)) {
	groups, _ := o.cfg.Sources.Groups.ListGroups()
	for _, g := range groups {
		offs, err := fetchOffsets(o.cfg.Sources.Groups, g.Group)
		if err != nil {
			continue
		}
		for tp, off := range offs {
			hw, ok := hws[tp]
			if !ok {
				continue
			}
			gauge(dGroupLag, float64(max(0, hw-off.Offset)), g.Group, tp.Topic, strconv.Itoa(int(tp.Partition)))
		}
	}
}
