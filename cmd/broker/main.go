package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/cluster"
	"github.com/kafkazk/broker/group"
	"github.com/kafkazk/broker/logstore"
	"github.com/kafkazk/broker/observe"
	"github.com/kafkazk/broker/partition"
	"github.com/kafkazk/broker/protocol"
	"github.com/kafkazk/broker/security"
	"github.com/kafkazk/broker/zkcoord"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: broker server.properties [--override key=value ...]")
}

// loadConfig reads the properties file and applies --override key=value pairs.
func loadConfig(args []string) (*Config, error) {
	if len(args) < 1 || strings.HasPrefix(args[0], "-") {
		return nil, errors.New("missing server.properties")
	}
	props, err := ParseProperties(args[0])
	if err != nil {
		return nil, err
	}
	rest := args[1:]
	for len(rest) > 0 {
		flag := rest[0]
		var kv string
		switch {
		case flag == "--override" && len(rest) > 1:
			kv, rest = rest[1], rest[2:]
		case strings.HasPrefix(flag, "--override="):
			kv, rest = strings.TrimPrefix(flag, "--override="), rest[1:]
		default:
			return nil, fmt.Errorf("unexpected argument %q", flag)
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--override %q is not key=value", kv)
		}
		props[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return BuildConfig(props)
}

// newLogger is the root logger, at BROKER_LOG_LEVEL (info by default),
// with the log levels that BROKER_LOGGER resources change at run time.
func newLogger() (zerolog.Logger, *logLevels) {
	level := zerolog.InfoLevel
	if v := os.Getenv("BROKER_LOG_LEVEL"); v != "" {
		if l, err := zerolog.ParseLevel(v); err == nil {
			level = l
		}
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	// The levels filter every event (per logger, changeable at run time);
	// zerolog's global level must not hide TRACE from them.
	zerolog.SetGlobalLevel(zerolog.TraceLevel)
	levels := newLogLevels(level)
	return levels.root(zerolog.New(os.Stderr).With().Timestamp().Logger()), levels
}

func run(args []string) int {
	cfg, err := loadConfig(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "broker: %v\n", err)
		usage()
		return 2
	}
	root, levels := newLogger()
	log := root.With().Int32("broker_id", cfg.BrokerID).Logger()
	if err := applyTestHooks(log); err != nil {
		fmt.Fprintf(os.Stderr, "broker: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, cfg, log, levels); err != nil {
		log.Error().Err(err).Msg("broker failed")
		fmt.Fprintf(os.Stderr, "broker: %v\n", err)
		return 1
	}
	log.Info().Msg("broker stopped")
	return 0
}

// serve starts every component in order and runs until ctx ends.
func serve(ctx context.Context, cfg *Config, log zerolog.Logger, levels *logLevels) error {
	log.Info().Str("zookeeper.connect", cfg.ZooKeeperConnect).Strs("log.dirs", cfg.LogDirs).
		Interface("listeners", cfg.Listeners).Msg("starting")

	// Bind first, so a port in use fails before anything is registered.
	listeners := make([]net.Listener, 0, len(cfg.Listeners))
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for _, l := range cfg.Listeners {
		ln, err := net.Listen("tcp", net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))))
		if err != nil {
			return fmt.Errorf("listen %s: %w", l.Name, err)
		}
		listeners = append(listeners, ln)
	}
	endpoints, err := advertisedEndpoints(cfg, listeners)
	if err != nil {
		return err
	}

	// The HTTP side (http.listener): bound now, served once the replicas,
	// the session and the groups it reads exist. Its Observer is the
	// metrics hook of partition, zkcoord and protocol.
	var (
		obs         *observe.Observer
		httpLn      net.Listener
		partMetrics partition.Metrics
		ctrlMetrics zkcoord.Metrics
		reqObserver protocol.RequestObserver
	)
	if cfg.HTTPListener != "" {
		httpLn, err = net.Listen("tcp", cfg.HTTPListener)
		if err != nil {
			return fmt.Errorf("listen http.listener %s: %w", cfg.HTTPListener, err)
		}
		defer func() {
			if httpLn != nil {
				_ = httpLn.Close()
			}
		}()
		obs = observe.New(observe.Config{BrokerID: cfg.BrokerID, ReplicaLagTimeMax: cfg.ReplicaLagTimeMax})
		partMetrics, ctrlMetrics, reqObserver = obs, obs, obs
	}

	// Security: every listener's TLS context (key files read now, and
	// again when they change) and SASL credentials; SCRAM credentials come
	// from ZooKeeper into scramCache once the session exists. The
	// inter-broker client authenticates to the inter-broker listener like
	// any client.
	scramCache := &security.ScramCredentialCache{}
	listenerSec, clientSec, err := listenerSecurity(cfg, scramCache, levels.component(log, "security"))
	if err != nil {
		return err
	}
	zkDigest, err := zooKeeperCredentials(os.Getenv("KAFKA_OPTS"))
	if err != nil {
		return err
	}

	// The inter-broker client resolves broker ids through the session's
	// view of /brokers/ids; it is used only after the session exists.
	var session *zkcoord.Session
	client := protocol.NewBrokerClient(protocol.ClientConfig{
		Security:     clientSec,
		BrokerID:     cfg.BrokerID,
		ListenerName: cfg.InterBrokerListenerName,
		Resolve: func(id int32) (cluster.Broker, bool) {
			return session.Broker(id)
		},
		RequestTimeout: 30 * time.Second,
		Log:            levels.component(log, "client"),
	})
	defer client.Close()

	// Topic config changes read by the session reach live replicas
	// through configs (started once the replicas exist).
	configs := newConfigPusher(levels.component(log, "topicconfig"))
	// Dynamic broker configs (/config/brokers/<id> and <default>): read
	// right after Connect, before the components they configure start.
	dyn := newDynamicConfig(cfg, levels.component(log, "dynamicconfig"))
	connectCtx, cancel := context.WithTimeout(ctx, cfg.ZooKeeperConnectionTimeout)
	session, err = zkcoord.Connect(connectCtx, zkcoord.Config{
		Connect:               cfg.ZooKeeperConnect,
		SessionTimeout:        cfg.ZooKeeperSessionTimeout,
		ConnectionTimeout:     cfg.ZooKeeperConnectionTimeout,
		BrokerID:              cfg.BrokerID,
		Endpoints:             endpoints,
		Rack:                  cfg.Rack,
		Sender:                client,
		UncleanLeaderElection: cfg.LogDefaults.UncleanLeaderElection,
		TopicDefaults:         &cfg.LogDefaults,
		AutoLeaderRebalance:   cfg.AutoLeaderRebalanceEnable,
		OnTopicConfigChange:   configs.changed,
		OnBrokerConfigChange:  dyn.changed,
		Metrics:               ctrlMetrics,
		Digest:                zkDigest,
		SetACL:                cfg.Security.ZooKeeperSetACL,
		Log:                   levels.component(log, "zkcoord"),
	})
	cancel()
	if err != nil {
		return err // zkcoord names the servers
	}
	defer func() {
		start := time.Now()
		_ = session.Close()
		log.Info().Dur("took", time.Since(start)).Msg("closed zookeeper session")
	}()
	if err := session.WatchScramCredentials(ctx, scramCache); err != nil {
		return fmt.Errorf("load SCRAM credentials from zookeeper: %w", err)
	}
	// authorizer.class.name=kafka.security.authorizer.AclAuthorizer: the
	// ACL cache follows ZooKeeper from here on.
	var authorizer protocol.Authorizer
	var aclAdmin protocol.ACLAdmin
	if cfg.Security.Authorizer {
		a := security.NewAuthorizer(security.AuthorizerConfig{SuperUsers: cfg.Security.SuperUsers,
			AllowEveryoneIfNoACLFound: cfg.Security.AllowEveryoneIfNoACLFound, Log: levels.component(log, "authorizer")})
		if err := session.WatchACLs(ctx, a); err != nil {
			return fmt.Errorf("load ACLs from zookeeper: %w", err)
		}
		authorizer, aclAdmin = a, session.ACLAdmin()
		if u := cfg.Security.InterBrokerUser; u != "" && !slices.Contains(cfg.Security.SuperUsers, security.User(u)) {
			log.Warn().Str("principal", security.User(u).String()).
				Msg("the inter-broker principal is not in super.users: replication and controller requests need ClusterAction ACLs for it")
		}
	}
	cfg = dyn.attach(session) // server.properties with the dynamic layers applied
	session.SetTopicDefaults(cfg.LogDefaults)

	files := logstore.NewFileCache(fileCacheCapacity(log))
	replicas, err := partition.NewManager(partition.Config{
		BrokerID:                        cfg.BrokerID,
		Files:                           files,
		RecoveryThreadsPerDataDir:       cfg.RecoveryThreadsPerDataDir,
		LogDirs:                         cfg.LogDirs,
		HighWatermarkCheckpointInterval: cfg.HighWatermarkCheckpointInterval,
		RecoveryPointCheckpointInterval: cfg.FlushOffsetCheckpointInterval,
		RetentionCheckInterval:          cfg.LogRetentionCheckInterval,
		ReplicaLagTimeMax:               cfg.ReplicaLagTimeMax,
		ReplicaFetchWaitMax:             cfg.ReplicaFetchWaitMax,
		ReplicaFetchMinBytes:            cfg.ReplicaFetchMinBytes,
		ReplicaFetchMaxBytes:            cfg.ReplicaFetchMaxBytes,
		LeaderClient:                    client,
		StateWriter:                     session,
		Metrics:                         partMetrics,
		Log:                             levels.component(log, "replicas"),
		Cleaner:                         cleanerConfig(cfg),
		TxnVerification:                 cfg.TransactionPartitionVerification,
		Now:                             wallNow,
	})
	if err != nil {
		return err
	}
	logDirsFailed := make(chan error, 1)
	replicas.SetLogDirFailureHandler(logDirFailureHandler(cfg.LogDirs, session, log, logDirsFailed))
	replicas.Start()
	defer func() {
		start := time.Now()
		if err := replicas.Close(); err != nil {
			log.Error().Err(err).Msg("close replicas")
		}
		log.Info().Dur("took", time.Since(start)).Msg("closed replicas")
	}()
	pushCtx, stopPush := context.WithCancel(ctx)
	pushDone := make(chan struct{})
	go func() {
		defer close(pushDone)
		effective := (&controlPlane{defaults: cfg.LogDefaults, dyn: dyn, session: session, log: log}).topicConfig
		configs.run(pushCtx, effective, replicas)
	}()
	defer func() { stopPush(); <-pushDone }() // before the replicas close

	groups := newCoordinator(cfg, replicas, group.Config{Logger: levels.component(log, "group"), Now: wallNow})
	groups.Start()
	defer groups.Close()

	// The transaction coordinator writes __transaction_state through the
	// replicas, allocates producer ids from the one allocator the
	// idempotent producers use, and sends markers through the
	// inter-broker client to the leaders the metadata cache names. It
	// closes before the groups and the replicas (defers run in reverse),
	// after the server stopped taking requests.
	meta := protocol.NewMetadataCache(session.ClusterID())
	producerIDs := session.ProducerIDs()
	txns := newTxnCoordinator(cfg, replicas, producerIDs,
		&markerWriter{client: client, meta: meta, log: levels.component(log, "txnmarkers")}, levels.component(log, "txn"))
	txns.Start()
	defer func() {
		if err := txns.Close(); err != nil {
			log.Error().Err(err).Msg("close transaction coordinator")
		}
	}()

	srv := protocol.NewServer(protocol.Config{
		BrokerID:                 cfg.BrokerID,
		MaxRequestBytes:          cfg.SocketRequestMaxBytes,
		ConnectionsMaxIdle:       cfg.ConnectionsMaxIdle,
		QueuedMaxRequestBytes:    cfg.QueuedMaxRequestBytes,
		MaxConnections:           protocol.ServerMaxConnections(cfg.MaxConnections),
		MaxConnectionsPerIP:      cfg.MaxConnectionsPerIP,
		InterBrokerListener:      cfg.InterBrokerListenerName,
		AutoCreateTopics:         cfg.AutoCreateTopics,
		DefaultPartitions:        cfg.NumPartitions,
		DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		FetchSessionCacheSlots:   protocol.ServerFetchSessionCacheSlots(cfg.MaxIncrementalFetchSessionCacheSlots),
		Replicas:                 replicas,
		Metadata:                 meta,
		Admin:                    &admin{session: session, defaults: cfg.LogDefaults, dyn: dyn, static: cfg.StaticProps, deleteEnabled: cfg.DeleteTopicEnable},
		ProducerIDs:              producerIDs,
		ControlPlane: &controlPlane{brokerID: cfg.BrokerID, defaults: cfg.LogDefaults, dyn: dyn, session: session,
			replicas: replicas, meta: meta, groups: groups, txns: txns, log: levels.component(log, "controlplane")},
		Groups: groups,
		OffsetsTopic: protocol.OffsetsTopicConfig{Partitions: cfg.OffsetsTopicNumPartitions,
			ReplicationFactor: cfg.OffsetsTopicReplicationFactor, SegmentBytes: cfg.OffsetsTopicSegmentBytes},
		Transactions: txns,
		TransactionTopic: protocol.TransactionTopicConfig{Partitions: cfg.TransactionStateLogNumPartitions,
			ReplicationFactor: cfg.TransactionStateLogReplicationFactor, MinISR: cfg.TransactionStateLogMinISR,
			SegmentBytes: cfg.TransactionStateLogSegmentBytes},
		TxnVerification:      cfg.TransactionPartitionVerification,
		TxnVerifier:          client,
		LeaderEpochs:         replicas,
		BrokerEpoch:          session.BrokerEpoch,
		RequestObserver:      reqObserver,
		BrokerConfigs:        dyn,
		BrokerLoggers:        levels,
		Listeners:            listenerSec,
		MaxReceiveBeforeAuth: cfg.Security.MaxReceiveBeforeAuth,
		FailedAuthDelay:      cfg.Security.FailedAuthDelay,
		MaxReauth:            cfg.Security.MaxReauth,
		Authorizer:           authorizer,
		ACLAdmin:             aclAdmin,
		ScramAdmin:           scramAdmin{session.ScramAdmin()},
		Log:                  levels.component(log, "protocol"),
	})
	serveErr := make(chan error, len(listeners))
	for i, ln := range listeners {
		name := cfg.Listeners[i].Name
		go func() { serveErr <- srv.Serve(ln, name) }()
		log.Info().Str("listener", name).Str("addr", ln.Addr().String()).Msg("serving")
	}
	listeners = nil // the server owns them now
	defer func() {
		start := time.Now()
		_ = srv.Close()
		log.Info().Dur("took", time.Since(start)).Msg("stopped serving")
	}()

	// Dynamic broker config changes from now on, without a restart.
	dyn.onLogDefaults = func(d cluster.LogConfig) {
		session.SetTopicDefaults(d)
		for _, t := range hostedTopics(replicas) {
			configs.changed(t) // every partition without the override gets the new default
		}
	}
	dyn.onCleaner = replicas.ReconfigureCleaner
	dyn.onRecoveryThreads = replicas.SetRecoveryThreadsPerDataDir
	dyn.onUncleanLeaderElection = session.SetUncleanLeaderElectionDefault // the controller's cluster-wide default (Kafka's UncleanLeaderElectionEnable event)
	dyn.onConnectionLimits = func(maxConnections, perIP int) {
		srv.SetConnectionLimits(protocol.ServerMaxConnections(maxConnections), perIP)
	}
	// leader.replication.throttled.rate and follower.replication.throttled.rate
	// come from /config/brokers/<id> only, as Kafka's BrokerConfigHandler
	// reads them: start applies them once, then on every change.
	dyn.ReplicationThrottles = replicas.SetReplicationQuotas
	dynCtx, stopDyn := context.WithCancel(ctx)
	dynDone := make(chan struct{})
	go func() { defer close(dynDone); dyn.start(dynCtx) }()
	defer func() { stopDyn(); <-dynDone }()
	if obs != nil {
		obs.SetSources(observe.Sources{Partitions: replicas, Controller: session, Groups: groups,
			ProduceWaits: replicas.PendingProduceWaits, Cleaner: replicas, Quotas: replicas})
		httpSrv := obs.Serve(httpLn)
		log.Info().Str("addr", httpLn.Addr().String()).Msg("serving http: /metrics, /v1/partitions, /")
		httpLn = nil // the server owns it now
		defer func() { _ = httpSrv.Close() }()
	}

	// Register last: the controller reacts by sending this broker its
	// metadata and partition states, which need the server running.
	if err := session.Register(ctx); err != nil {
		return fmt.Errorf("register broker %d: %w", cfg.BrokerID, err)
	}
	log.Info().Str("cluster_id", session.ClusterID()).Int64("broker_epoch", session.BrokerEpoch()).Msg("registered in zookeeper")

	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down")
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case err := <-logDirsFailed:
		if cfg.ControlledShutdownEnable {
			replicas.BeginShutdown()
			controlledShutdown(cfg, session, client, log)
		}
		return err
	}
	if cfg.ControlledShutdownEnable {
		// The StopReplica requests of the controlled shutdown leave the
		// logs open for the one close of them all (partition.Manager.Close).
		replicas.BeginShutdown()
		controlledShutdown(cfg, session, client, log)
	}
	return nil
}

// controlledShutdown asks the controller to move this broker's leaderships
// away before it stops, so that a clean stop costs clients well under a
// second of unavailability instead of a session timeout. It gives up after
// a few attempts: the session's end moves leadership anyway.
// controlledShutdownRequestTimeout bounds one ControlledShutdown attempt:
// Kafka's request.timeout.ms default, which KafkaServer's controlled
// shutdown waits. The controller answers once it has moved every
// leadership and shrunk every ISR the broker is in, which at 10,000
// partitions on a loaded machine takes longer than a few seconds; an
// attempt cut short only queues a second request behind the first.
const controlledShutdownRequestTimeout = 30 * time.Second

func controlledShutdown(cfg *Config, session *zkcoord.Session, client *protocol.BrokerClient, log zerolog.Logger) {
	start := time.Now()
	const attempts = 5
	for i := 1; i <= attempts; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), controlledShutdownRequestTimeout)
		remaining, err := func() ([]cluster.TopicPartition, error) {
			id := session.ControllerID()
			if id < 0 {
				return nil, errors.New("no controller")
			}
			ctrl, found := session.Broker(id)
			if !found {
				return nil, fmt.Errorf("controller %d not registered", id)
			}
			return client.ControlledShutdown(ctx, ctrl, cfg.BrokerID, session.BrokerEpoch())
		}()
		cancel()
		if err == nil && len(remaining) == 0 {
			log.Info().Dur("took", time.Since(start)).Int("attempt", i).Msg("controlled shutdown complete")
			return
		}
		log.Warn().Err(err).Int("remaining", len(remaining)).Int("attempt", i).Msg("controlled shutdown incomplete")
		time.Sleep(200 * time.Millisecond)
	}
	log.Warn().Dur("took", time.Since(start)).Msg("controlled shutdown gave up; stopping anyway")
}

// advertisedEndpoints resolves advertised.listeners: an empty host becomes
// this machine's host name and port 0 the port actually bound.
func advertisedEndpoints(cfg *Config, bound []net.Listener) ([]cluster.Endpoint, error) {
	var out []cluster.Endpoint
	for _, a := range cfg.AdvertisedListeners {
		host, port := a.Host, a.Port
		if host == "" || host == "0.0.0.0" || host == "::" {
			h, err := os.Hostname()
			if err != nil {
				return nil, fmt.Errorf("advertised.listeners: host for %s: %w", a.Name, err)
			}
			host = h
		}
		if port == 0 {
			for i, l := range cfg.Listeners {
				if l.Name == a.Name {
					port = int32(bound[i].Addr().(*net.TCPAddr).Port)
				}
			}
		}
		out = append(out, cluster.Endpoint{Listener: a.Name, SecurityProtocol: cfg.SecurityProtocolMap[a.Name], Host: host, Port: port})
	}
	return out, nil
}

// cleanerConfig is the replica manager's log cleaner configuration.
// log.cleaner.threads=0 leaves Kafka's cleaner with no thread, so nothing
// is cleaned: here the cleaner is off. log.cleaner.io.buffer.size and
// log.cleaner.io.buffer.load.factor are read and validated only, and not dynamic
// (logstore's cleaner buffers 1 MiB and fills its offset map to 90%, the
// load factor's default).
func cleanerConfig(c *Config) partition.CleanerConfig {
	return partition.CleanerConfig{
		Enable:              c.LogCleanerEnable && c.LogCleanerThreads > 0,
		Threads:             c.LogCleanerThreads,
		DedupeBufferSize:    c.LogCleanerDedupeBufferSize,
		IOMaxBytesPerSecond: c.LogCleanerIOMaxBytesPerSecond,
		Backoff:             c.LogCleanerBackoff,
	}
}

// hostedTopics lists the topics with a replica on this broker.
func hostedTopics(replicas *partition.Manager) []string {
	seen := map[string]bool{}
	var out []string
	for _, tp := range replicas.Hosted() {
		if !seen[tp.Topic] {
			seen[tp.Topic] = true
			out = append(out, tp.Topic)
		}
	}
	return out
}
