// Package protocol serves the Kafka wire protocol: TCP listeners, request
// framing, the request header, decoding and encoding bodies with kmsg,
// dispatch by API key, and the one table that maps the broker's domain
// errors to Kafka error codes. It owns no broker state: replicas, cluster
// metadata, topic administration and producer ids come in through the
// Replicas, Metadata, Admin and ProducerIDs interfaces (deps.go).
//
// It is also both ends of the inter-broker protocol: the server side of
// the controller's LeaderAndIsr, StopReplica and UpdateMetadata, of
// ControlledShutdown and of OffsetForLeaderEpoch (through the ControlPlane
// and LeaderEpochs interfaces), and BrokerClient (client.go), which
// followers use as partition.LeaderClient, the controller as its
// BrokerSender, and a stopping broker for ControlledShutdown.
// MetadataCache (metadata_cache.go) is a Metadata filled only by
// UpdateMetadata, as Kafka's is, indexed by topic with each topic's
// partitions kept sorted, so a Metadata request for a few topics costs
// what they hold. CreateTopics, CreatePartitions and
// DeleteTopics answer once it shows their outcome (leaders for new
// partitions, a deleted topic gone), woken by its Changed channel, or at
// timeout_ms with REQUEST_TIMED_OUT, as Kafka's delayed admin operations.
//
// # Framing
//
// Every request is an int32 size and that many bytes. A size below the
// shortest header (10 bytes) or above Config.MaxRequestBytes
// (socket.request.max.bytes) closes the connection before anything is
// allocated; a valid size is still not trusted with memory: past 64 KiB
// the frame buffer grows only as bytes arrive. The header (api key,
// version, correlation id, nullable client id, then a tag buffer for
// flexible versions; ControlledShutdown v0 alone has a header without a
// client id, as in Kafka) is parsed by hand; the body only by kmsg
// (RequestForKey, SetVersion, ReadFrom), which checks remaining bytes
// before every allocation. Responses are the request's ResponseKind,
// encoded with AppendTo behind the correlation id and, for flexible
// versions, an empty header tag buffer — except ApiVersions, whose
// response header never has one.
//
// # What is refused
//
// Exactly the keys and version ranges in supportedAPIs whose dependency is
// configured are served (LeaderAndIsr, StopReplica, UpdateMetadata and
// ControlledShutdown need Config.ControlPlane, OffsetForLeaderEpoch
// Config.LeaderEpochs, the transaction keys Config.Transactions or the
// TxnPartitions capability), and ApiVersions advertises exactly that table. As in Kafka, the connection
// is closed (nothing is answered) for: a bad size, a frame too short for
// its header, an unknown or unserved API key, a served key at a version
// outside its range, a body that does not decode, a handler panic
// (recovered and logged at Error with api_key, correlation_id and
// remote_addr), and an acks=0 produce with any failed partition. The one
// exception is ApiVersions above our range, which is answered with
// UNSUPPORTED_VERSION in a v0 body listing the table so that clients
// retry lower. Trailing bytes after a decoded body are ignored.
// Fetch serves KIP-227 incremental fetch sessions (v7+, for consumers and
// followers alike; 01_fetch.go): an idle session's fetch names no
// partition and is answered with none, and BrokerClient keeps one
// session per leader. Topic ids,
// GSSAPI and OAUTHBEARER, and KIP-890 part 2 (TRANSACTION_ABORTABLE, an epoch bump per
// transaction) are not served. The consumer group keys are served when
// Config.Groups (the group coordinator, package group) is set;
// FindCoordinator creates __consumer_offsets on first use.
//
// # Transactions
//
// The transaction keys (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// DescribeTransactions, ListTransactions; TxnOffsetCommit when Groups also
// implements TxnGroups) are served when Config.Transactions (the
// transaction coordinator, package txn) is set; FindCoordinator key type 1
// then creates __transaction_state on first use, and InitProducerId with a
// transactional id goes to it. The partition leader's side
// (WriteTxnMarkers, DescribeProducers, verified transactional produce) is
// served when Config.Replicas implements TxnPartitions. Produce refuses
// transactional batches without a transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and, with Config.TxnVerification
// (KIP-890 part 1), appends a producer's first transactional batch on a
// partition only after the coordinator confirms the partition is in its
// transaction: locally through Transactions when this broker leads the
// id's __transaction_state partition in the metadata, else through
// Config.TxnVerifier (BrokerClient.VerifyPartitionsInTxn) to the leader,
// and with the replica's verification guard, which a marker in between
// clears. That round trip parks only the producer's connection.
// TxnOffsetCommit is verified the same way, for the group's partition of
// __consumer_offsets, and committed with its guard (as Kafka 3.6+), so a
// late or zombie request of a transaction already ended is refused rather
// than left pending with no marker to come.
// WriteTxnMarkers waits for each marker to be replicated before it answers
// and, as soon as a marker on __consumer_offsets is, tells the group
// coordinator (TxnGroups.CompleteTxn, with the marker's offset). Fetch answers the last stable offset and,
// for read_committed consumers, the aborted transactions; ListOffsets
// bounds read_committed by the LSO; OffsetFetch passes RequireStable.
//
// # Authorization
//
// Config.Authorizer (authorizer.class.name; *security.Authorizer) decides
// every check; nil allows everything, as Kafka without an authorizer.
// Each handler asks, through the one helper set in authz.go, exactly what
// Kafka's KafkaApis asks, with the request's principal and client IP
// (reqContext, set by the connection from TLS or SASL), and answers
// Kafka's codes: TOPIC_AUTHORIZATION_FAILED per topic or partition,
// GROUP_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
// CLUSTER_AUTHORIZATION_FAILED for the whole request. A refused request
// or partition reaches no interface: nothing is appended, read, created,
// deleted or committed. In short: Produce Write on the topic (and on the
// transactional id for transactional records); Fetch Read, or
// ClusterAction for a follower, refused before the replica sees it so the
// high watermark cannot move (CVE-2018-1288); ListOffsets and
// OffsetForLeaderEpoch Describe (ClusterAction covers the latter);
// Metadata lists only topics the principal may Describe and auto-creates
// only with Create on the cluster or the topic; the group keys Read,
// Describe or Delete on the group and Read or Describe on its topics;
// FindCoordinator Describe on the group or transactional id;
// InitProducerId Write on the transactional id or, idempotent (KIP-679),
// IdempotentWrite on the cluster or Write on any topic; the transaction
// keys Write on the transactional id, Read on the group, Write or Read on
// the topics, ClusterAction for the brokers' AddPartitionsToTxn v4 and
// for WriteTxnMarkers (or cluster Alter); CreateTopics Create,
// DeleteTopics and DeleteRecords Delete, CreatePartitions Alter; the
// config keys DescribeConfigs or AlterConfigs on the topic or cluster;
// ElectLeaders and the reassignments cluster Alter or Describe;
// DescribeLogDirs cluster Describe; LeaderAndIsr, StopReplica,
// UpdateMetadata and ControlledShutdown ClusterAction, before any epoch is
// adopted. Metadata, DescribeGroups and DescribeCluster fill authorized
// operations when asked. A denial logs one Info line ("authorization
// denied": principal, operation, resource_type, resource, host,
// remote_addr), except where Kafka checks quietly.
//
// DescribeAcls, CreateAcls and DeleteAcls are always advertised and
// answer SECURITY_DISABLED without an Authorizer (writes also without
// Config.ACLAdmin, the ZooKeeper store); filters and bindings are
// validated with the security package. DescribeUserScramCredentials and
// AlterUserScramCredentials are served with Config.ScramAdmin, with
// ZkAdminManager's validations.
//
// # Ordering and concurrency
//
// Each connection has a reader goroutine, which reads, decodes and handles
// one request at a time, and a writer goroutine, the only one writing to
// the socket, fed through a small bounded channel. Responses therefore
// leave in request order, and a client that pipelines is pushed back by
// TCP. A Fetch long poll on Replicas.Changed parks only its own
// connection and holds no lock of this package. A Produce appends with
// WakeBatcher when Replicas has it, waking those long polls once after its
// last append rather than once per partition. A fetch session's mu is
// held only to update it at the start of a fetch and to record its answer
// at the end (lock order fetchSession.mu -> fetchSessionCache.mu), never
// across a read of a partition or the wait. An acks=all Produce
// appends in the reader and waits in WaitCommitted in a goroutine of its
// own (reqContext.complete), whose response the writer takes as a future
// in its turn: the producer's next Produce is appended meanwhile, and any
// other request waits until every earlier response is complete. Every wait ends with its request timeout or
// when the Server closes. Server.mu guards only the sets of listeners and
// connections and is never held across I/O or a call into the
// interfaces. Server.controlSem serializes the controller's requests
// (LeaderAndIsr, StopReplica, UpdateMetadata) from the controller epoch
// check through the ControlPlane call, as Kafka's replicaStateChangeLock
// does, so a deposed controller's request cannot be applied after its
// successor's; it is taken with the request's context, never while
// holding Server.mu, and ControlPlane must not call back into the Server.
//
// # Controller requests
//
// The server remembers the highest controller epoch seen across
// LeaderAndIsr, StopReplica and UpdateMetadata. Before this broker has
// registered (Config.BrokerEpoch() is 0) every one answers
// BROKER_NOT_AVAILABLE, which the controller retries. A request whose broker
// epoch (where the version carries one, and it is not -1) is older than
// Config.BrokerEpoch() answers STALE_BROKER_EPOCH; one whose controller
// epoch is older than the highest seen answers STALE_CONTROLLER_EPOCH.
// Each fails the whole request and never reaches ControlPlane. A
// LeaderAndIsr partition state without a zkVersion (-1) answers
// INVALID_REQUEST for that partition and is left out. The wire
// forms (ungrouped and grouped partition states, endpoints, leader epochs
// of StopReplica v3) are decoded into the cluster value types by
// functions that sit beside their encoders in each handler file, so one
// test round-trips both at every version.
//
// # BrokerClient
//
// One connection per destination broker and purpose: follower traffic
// (Fetch, OffsetForLeaderEpoch, and ListOffsets EARLIEST for a fetch
// offset out of range, partition.EarliestOffsetLister), controller
// traffic (LeaderAndIsr, UpdateMetadata, StopReplica),
// ControlledShutdown, the transaction coordinator's WriteTxnMarkers
// (answered once replicated) and a leader's transaction verification
// (AddPartitionsToTxn v4 VerifyOnly) never share one, so a long-polling
// Fetch never delays a LeaderAndIsr, a controller handling this broker's
// ControlledShutdown can still reach it, and a produce never waits behind
// another transaction's markers. Requests
// on one connection go one at a time, under a per-connection semaphore
// taken with the caller's context; BrokerClient.mu guards only the map of
// connections and is never held with a semaphore. Requests are framed by
// kmsg.RequestFormatter with client id "broker-<id>" at fixed versions
// (the highest this server serves), responses read with the size checked
// before allocating and the correlation id checked. Any connection error
// closes the connection; the next request redials, and a request that
// found a reused connection dead is retried once. Response error codes
// come back through codeErrors, the reverse of errorCodes, as errors
// wrapping both the domain sentinel and the kerr error. Close ends
// requests in flight with ErrClientClosed.
//
// Close closes listeners and connections, cancels every wait, and returns
// after all goroutines the server started have ended; it is safe to call
// twice. Serve returns ErrServerClosed after Close.
//
// # Connection security
//
// Config.Listeners gives each listener (by the name Serve gets) its
// security protocol; a listener absent from it is PLAINTEXT. SSL and
// SASL_SSL connections are TLS servers over the listener's
// security.TLSContext, whose GetConfigForClient picks up reloaded key
// files, so new connections get a new certificate without a restart; the
// handshake runs first in readLoop, within connections.max.idle.ms. On SSL
// the client certificate's DN, mapped by PrincipalMapper, is the
// connection's principal (User:ANONYMOUS without one); on SASL listeners
// it is User:<authorization id>; elsewhere User:ANONYMOUS. Every
// reqContext carries principal, host (the client's IP) and
// securityProtocol.
//
// A SASL listener's connection follows Kafka's SaslServerAuthenticator
// (17_sasl_handshake.go, 36_sasl_authenticate.go), before dispatch:
// until authenticated only ApiVersions and SaslHandshake are read, then
// SaslAuthenticate (handshake v1) or raw size-prefixed tokens answered by
// raw tokens (handshake v0, Kafka's original framing). Any other request
// fails the authentication. Only one ApiVersions is served before
// SaslHandshake, as in Kafka (one more after one above our range, the
// client's retry), none while re-authenticating. Before authentication,
// and while re-authenticating, a size prefix above
// Config.MaxReceiveBeforeAuth (sasl.server.max.receive.size) closes the
// connection before any allocation, and a key the stage does not allow
// is refused from the header before its body is decoded (CVE-2022-34917;
// kmsg allocates up to ~90 times a frame decoding it); the keys allowed
// are decoded only with at most maxPreAuthTags tags in each tag buffer
// (counted first, frame.go). A failure gives back the frame's
// queued.max.request.bytes share, waits Config.FailedAuthDelay, then
// answers (SASL_AUTHENTICATION_FAILED with a message naming only the
// mechanism, UNSUPPORTED_SASL_MECHANISM with the enabled list,
// ILLEGAL_SASL_STATE) where the framing allows and closes; an unexpected
// request, a v0 token and a re-authentication with another mechanism get
// no answer. With Config.MaxReauth (connections.max.reauth.ms) the
// completing SaslAuthenticate carries SessionLifetimeMs; a SaslHandshake
// on an authenticated connection whose session has a lifetime (and whose
// last re-authentication began at least a second ago) re-authenticates
// in place, keeping principal and mechanism or failing; a request after
// the session's end closes the connection (KIP-368). Elsewhere, and after
// authentication without a lifetime, SaslHandshake and SaslAuthenticate
// answer ILLEGAL_SASL_STATE, as KafkaApis does. The SASL state belongs to
// the connection's readLoop alone.
//
// BrokerClient's ClientConfig.Security dials the inter-broker listener
// with TLS (the listener's TLSContext: truststore, keystore as client
// certificate) and SASL (SaslHandshake v1 and SaslAuthenticate v1 with a
// franz-go client mechanism, SASLMechanism). A connection whose session
// has a lifetime re-authenticates in place at 85% of it, before its next
// request (KIP-368), and redials if the server refuses. The controller,
// the followers and the marker writer all use it.
//
// TLS connections, server and client side, run over a recordConn
// (tlsconn.go) rather than the bare socket, as Kafka's SslTransportLayer
// keeps network buffers: writeLoop writes each response through
// writeFrame, which corks it so that the response's 16 KiB records reach
// the socket in writes of up to 256 KiB (tls.Conn alone makes one write
// system call per record), and reads take up to 64 KiB of records at a
// time. Writes outside writeFrame (handshake, alerts) go straight through.
//
// # Errors
//
// Handlers turn errors from the interfaces into codes through errorCodes
// in errors.go, matched with errors.Is so wrapped errors map like their
// sentinel. An unmapped error answers UNKNOWN_SERVER_ERROR and is logged at
// Error — except on the produce path, where it answers REQUEST_TIMED_OUT,
// because the append may have happened and the client must retry rather
// than give up (KAFKA-14034). A partition this broker holds no replica of
// answers NOT_LEADER_OR_FOLLOWER when the metadata knows it, else
// UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
// A replica in a log dir that failed answers KAFKA_STORAGE_ERROR (56,
// partition.ErrStorage) to Produce, Fetch, ListOffsets,
// OffsetsForLeaderEpoch, DeleteRecords and LeaderAndIsr; DescribeLogDirs
// answers such a dir with that error and no topics.
// BrokerClient.LeaderAndIsrOffline returns the partitions a LeaderAndIsr
// answered KAFKA_STORAGE_ERROR for, which the controller marks offline.
//
// Each handler file (NN_name.go, by API key) opens with its versions and
// behaviour.
package protocol
