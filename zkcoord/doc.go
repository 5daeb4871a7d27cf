// Package zkcoord is the broker's ZooKeeper layer: the session, broker
// registration, controller election and the controller itself, a small
// cache of brokers and topic configs fed by watches, topic administration,
// leader-side ISR writes and producer-id blocks. It owns every znode path
// (paths.go, the only place paths are built) and every znode payload
// (json.go), written in Apache Kafka's own formats so that zkCli.sh and
// Kafka's tools see a cluster that looks like Kafka's (2.4–2.6):
//
//	/brokers/ids/<id>         E  {"version":4,"host":"h","port":9092,"jmx_port":-1,"timestamp":"<ms>",
//	                             "endpoints":["PLAINTEXT://h:9092"],"listener_security_protocol_map":{...},"rack":"r"}
//	/controller               E  {"version":1,"brokerid":N,"timestamp":"<ms>"}
//	/controller_epoch         P  a plain decimal integer, e.g. 5
//	/brokers/topics/<t>       P  {"version":2,"partitions":{"0":[1,2,3]},"adding_replicas":{},"removing_replicas":{}}
//	.../partitions/<p>/state  P  {"controller_epoch":C,"leader":L,"version":1,"leader_epoch":E,"isr":[...]}
//	/config/topics/<t>        P  {"version":1,"config":{"min.insync.replicas":"2"}}
//	/config/changes/config_change_<seq>  PS  {"version":2,"entity_path":"topics/<t>"}
//	/config/brokers/<id>, /config/brokers/<default>  P  {"version":1,"config":{"log.retention.ms":"1000"}}
//	                             (notified as {"version":2,"entity_path":"brokers/<id>"}; brokerconfig.go)
//	/admin/delete_topics/<t>  P  empty
//	/isr_change_notification/isr_change_<seq>  PS  {"version":1,"partitions":[{"topic":"t","partition":0}]}
//	/log_dir_event_notification/log_dir_event_<seq>  PS  {"version":1,"broker":N,"event":1}
//	/cluster/id               P  {"version":"1","id":"<22-char base64url uuid>"}
//	/latest_producer_id_block P  {"version":1,"broker":N,"block_start":"S","block_end":"E"}
//	/kafka-acl/<Type>/<name>, /kafka-acl-extended/prefixed/<Type>/<name>  P
//	                             {"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"}]}
//	/kafka-acl-changes/acl_changes_<seq>           PS  "TOPIC:<name>"
//	/kafka-acl-extended-changes/acl_changes_<seq>  PS  {"version":1,"resourceType":"TOPIC","name":"n","patternType":"PREFIXED"}
//	/config/users/<sanitized user>  P  {"version":1,"config":{"SCRAM-SHA-512":"salt=..,stored_key=..,server_key=..,iterations=4096"}}
//	                             (notified as {"version":2,"entity_path":"users/<sanitized user>"})
//
// Readers accept older versions (topic version 1, registrations without
// endpoints) and ignore unknown fields. zookeeper.connect may carry a
// chroot, which zkcoord creates and prefixes itself (go-zookeeper has none).
//
// # What it refuses to do
//
// It never touches logs or speaks the wire protocol: the controller's
// requests leave through BrokerSender, which protocol implements, and
// partition state reaches brokers only through those requests: no session
// watches or caches a partition state znode (a broker serves metadata from
// the protocol's MetadataCache, which UpdateMetadata fills, as Kafka's
// does). It imports partition for StateWriter and ErrStateConflict only,
// never protocol or logstore.
//
// # The controller
//
// While this broker holds /controller, one goroutine (controller.run in
// ctrlloop.go) owns the controller context: live brokers with their epochs
// (registration czxid), every topic's assignment and every partition's
// last state. Its files have one job each: ctrlloop.go is the loop and its
// work, ctrlstore.go its ZooKeeper access and reads, ctrlstate.go the
// partition state writes, ctrlrequests.go the requests it sends,
// ctrlbrokers.go and ctrltopics.go the event handlers, election.go the
// pure decisions, sender.go the per-broker send queues, ctrlbatch.go the
// pipelined ZooKeeper calls.
//
// On failover it first deletes stale ISR change notifications (before any
// state is read, as Kafka does, so a leader's ISR write during the
// failover keeps its notification), then reads all of it, sends
// UpdateMetadata (all partitions) to every live broker, then
// LeaderAndIsr to each for the partitions it replicates, creates the state
// of partitions that have none, elects leaders where the leader is dead or
// -1, drops dead replicas from ISRs and finishes topic deletions.
// Afterwards it handles coalesced events posted by the session goroutine's
// watches (broker changes, new topics and partitions, deletions, ISR change
// notifications, topic configs), ControlledShutdown calls and the auto
// leader rebalance tick. Decisions are pure functions (election.go:
// ElectLeader, ElectControlledShutdownLeader, ElectPreferredLeader,
// PreferredElections and the unexported offlineTransition and
// initialState); the loop reads each partition's state znode fresh before
// deciding, never its cache, and reads what else a decision needs (a
// topic's unclean.leader.election.enable) before it, not inside it.
//
// Log dir failures (ctrllogdir.go, logdirevent.go) are Kafka's: a broker
// whose log dir failed writes /log_dir_event_notification/log_dir_event_<seq>
// (Session.PropagateLogDirEvent); the controller watches those children,
// deletes the notifications it read (fenced by its epoch, as the ISR
// change notifications; failover deletes them all first) and sends
// LeaderAndIsr for every replica of the named brokers. With a BrokerSender
// that is a LeaderAndIsrOfflineSender, the partitions a broker answered
// KAFKA_STORAGE_ERROR are its offline replicas (kept per broker
// incarnation, forgotten when it dies or registers again; answered
// without error, online again): an offline replica counts as not alive
// for its partition, so elections (reconcile, controlled shutdown,
// rebalance, admin ElectLeaders preferred or unclean, a reassignment's)
// pick a leader from the ISR minus the offline replicas and ISRs drop them (leader epoch + 1), and
// UpdateMetadata lists them in offline_replicas.
//
// Partition reassignment (KIP-455, ctrlreassign.go) and admin leader
// elections (KIP-460, ctrlelect.go) run on the loop too: Session's
// AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders
// are calls into it (ErrNotController on any other broker), and
// /admin/reassign_partitions and /admin/preferred_replica_election, which
// 2.x tools write, are watched while this broker is the controller. A
// reassignment keeps RS with adding and removing replicas in the topic
// znode (version 2) until its target is in the ISR, which it learns from
// ISR change notifications; a new controller resumes it from there.
//
// The controller reaches ZooKeeper only through ctrlStore, which *zkConn
// implements (an in-memory memStore with per-call fault injection drives
// the scripted tests in testdata/controller).
//
// Calls that touch many partitions are pipelined, as Kafka 1.1's
// KafkaZkClient does over the asynchronous client: ctrlStore.Batch takes
// independent Gets and Multis and *zkConn keeps up to 1,000 of them in
// flight on its one connection (workers live only for the call), while
// memStore runs them one by one, each its own call with its own fault.
// Batched are: the failover's reads (every assignment in one batch, then
// every partition state), the first states of new partitions (each
// topic's partitions znode, then each partition's znode and state in one
// fenced multi, or the state alone where the partition znode exists), the
// state writes of elections, ISR removals, controlled shutdown and
// preferred elections (updateStates: read the states in one batch, read
// the topics' unclean.leader.election.enable where a leader is gone in
// one batch, decide each, write the changed ones as one batch of fenced
// multis conditional on their zkVersions; BADVERSION goes to the next
// round, at most 10), the read-backs of writes whose outcome is unknown,
// the ISR change notifications and their deletes, and the topic configs
// of a config change. Every write is still a multi fenced by
// /controller_epoch's zkVersion. Results are applied in the order of the
// calls, which is sorted, so the context never depends on the order the
// server answered in; every call has its own outcome, so a failure leaves
// exactly its partitions as work, and the first error that stops the step
// is returned after every result was applied. The first result that shows
// the controller fenced fences it before anything is announced. A batch
// hands out no further call once the controller is stopped or fenced, or
// once a call met zk.ErrNoServer, zk.ErrConnectionClosed, zk.ErrClosing,
// zk.ErrSessionExpired or a failed epoch check: the calls never handed out
// fail with errNotSent, certainly did not land (no read-back, no unknown
// outcome) and stay as work. Without that, go-zookeeper with no server
// reachable fails the calls it holds only about 1,000 a second. Calls the
// client already held are sent when it reconnects, even on the new session
// it opens after an expiry (go-zookeeper returns ErrSessionExpired to none
// of them): only the epoch check of each multi rejects those once a
// successor bumped /controller_epoch. A topic
// new to the context has its states created without reading them first
// (a state already there meets NODEEXISTS and is read back); a partition
// of a new topic with no live replica is then not read until a replica
// starts. After the failover's load, only partitions whose state has a
// dead leader or a dead ISR member are reconciled. Each event sends at
// most one LeaderAndIsr and one UpdateMetadata per broker (the failover
// sends its full UpdateMetadata and LeaderAndIsr first and the requests of
// its elections after). A 100,000-partition LeaderAndIsr or UpdateMetadata
// is one request. What an event leaves to do is
// durable work (ctrlWork): started brokers owed their metadata and
// LeaderAndIsr, partitions owed a first state, partitions owed an election
// or ISR removal, failed event handlers (which re-read what they cover),
// and started topic deletions (c.deleting). An item is removed only when
// it is done; a lost connection stops the step, and the loop retries what
// is left after a backoff (100 ms doubling to 5 s) until it succeeds, as
// Kafka's controller retries ZooKeeper requests until reconnected, staying
// responsive to stop meanwhile (between ZooKeeper calls: go-zookeeper
// blocks a request made while disconnected until it reconnects or the
// session expires). A write that fails with a lost connection
// (zk.ErrConnectionClosed and kin) has an unknown outcome: the state is
// read back at once, or at its next read if that fails too (c.unknown); if
// the stored leader, leader epoch, ISR and controller epoch are the ones
// written, it landed: the controller adopts the read zkVersion and
// announces it like any change. Writes of unknown outcome count as work
// themselves: the loop reads them back until it knows, even when no work
// item covers their partition any more (a preferred leader election).
// A first state found already there when it is created is announced as
// new only when c.unknown holds this term's create of it (landed with its
// reply lost); any other, even one with this controller's epoch, is
// adopted, announced with IsNew false and reconciled. A deletion whose request is gone
// from /admin/delete_topics landed too. The UpdateMetadata owed to every
// live broker after a broker failure or an endpoint change is work too,
// until sent. A partition whose state znode is unreadable is logged at
// Error and left out of the context (no leader, no requests) until an
// event of its topic reads it again; it does not stop the controller. An
// expired session ends the controller as a failed epoch check does (see
// Fencing).
//
// Topic deletion diverges from Kafka's TopicDeletionManager: StopReplica
// (delete) is sent to the live replicas and the znodes are deleted at
// once, without waiting for each replica to acknowledge the deletion, and
// a dead replica does not make the topic ineligible (it deletes its log
// when it next starts and finds the topic gone). Topics queued for
// deletion are not excluded from elections and rebalance until their
// znodes are gone (normally within the pass that starts the deletion;
// longer only while a ZooKeeper failure is being retried).
//
// Requests go through one bounded queue and goroutine per destination
// broker incarnation (sender.go), retried with backoff until the broker
// dies or re-registers, so a dead broker never blocks the others or the
// loop. Every queue's context derives from the controller's, which stop
// and a fence cancel: a stopped or fenced controller sends nothing more,
// and queues nothing new (announce and the send helpers check it). With Config.Sender nil the controller still keeps the znodes right
// and sends nothing.
//
// CreateTopic writes only the config and the assignment; the controller
// writes each new partition's state (leader = first live replica, ISR = live
// replicas in assignment order, leader epoch 0).
//
// Partition leaders write ISR changes themselves (Session implements
// partition.StateWriter) with a setData conditional on the zkVersion from
// LeaderAndIsr (never unconditional: a zkVersion below 0 is refused). A
// write that lost its connection has an unknown outcome: it is retried once
// the session is back and settled by reading the znode back (Kafka's
// retryRequestsUntilConnected and checkLeaderAndIsrZkData); a conflict
// carries the state read back (*partition.StateConflictError). Every state
// the controller writes bumps the leader epoch (elections, dropping a dead
// replica from an ISR, controlled shutdown, preferred election), so within
// a leader epoch only its leader writes the znode: partition relies on
// this to adopt its own unseen write from a conflict. Leaders batch
// NotifyIsrChange calls into one sequential /isr_change_notification node
// once no change came for 500 ms (at most 5 s after the first; Kafka uses
// 2.5 s checks and a 5 s blackout).
//
// Brokers read topic configs through a data watch on each
// /config/topics/<t> (and watch each /brokers/topics/<t>: two watches and
// two parked forwarding goroutines per topic per broker, so 10,000
// single-partition topics cost each broker 20,000 watches and goroutines;
// nothing per partition), and their dynamic broker configs through one on
// /config/brokers/<id> and <default>, not from the /config/changes
// notifications (written for Kafka's brokers and tools); they
// only purge those, as Kafka's ZkNodeChangeNotificationListener does:
// every broker, at startup, after a new session and whenever a
// notification is added, deletes the ones created more than 15 minutes
// ago (by ctime), which leaves every broker the time to read them.
//
// # Security (issue 14)
//
// ACLs (acl.go): WatchACLs loads every resource znode into a
// security.Authorizer (SetResourceACLs with the znode version) and follows
// both ACL change stores, as Kafka's ZkNodeChangeNotificationListener: on
// each children change, every notification newer than the last processed,
// in sequence order, re-reads the resource it names, then notifications
// older than 15 minutes are purged. ACLStore (ACLAdmin) is AclAuthorizer's
// write path: per resource pattern, read the znode, apply the change
// (security.AddACLs, security.RemoveMatching), write it back conditionally
// on the version read (create if absent, delete with its last ACL), re-read
// and retry (10 times, with a random pause up to 50 ms) when another writer
// won, then re-read the resource into this broker's cache (also when the
// write failed) and create the change notification. A write whose answer
// was lost is re-read like a lost race (DeleteACLs then reports what that
// write removed). The notification is created whenever the resource may
// have been written, and also when a call finds nothing to change: a
// client retrying a request whose notification was lost then repairs it;
// a duplicate only makes the brokers read once more. Its create is retried
// while its outcome is unknown (lost connection, no server, expired
// session) until it succeeds or the session closes: once the resource
// write landed, a lost notification would leave the old ACLs (a deleted
// Allow) live on every other broker. DeleteACLs visits the resource znodes
// in ZooKeeper, not the cache, so a change this broker has not yet heard
// of is not missed; it notifies every resource it visited.
//
// Reading fails closed. Entries decode one by one, as Kafka's
// AclEntry.fromBytes (security.DecodeResourceACLs): an operation or
// permission type this broker does not know becomes Unknown and matches
// nothing (an Unknown-operation Deny denies nothing, as Kafka's UNKNOWN:
// it was written for an operation this broker never checks), the other
// entries, Deny included, stay. A resource znode that cannot be read
// (NOAUTH) or parsed at all (bad JSON, another version, a principal that
// does not parse) fails WatchACLs at start-up, as Kafka's start-up fails;
// later its pattern gets security.DenyAllACE (every operation denied to
// User:* from every host; super users still pass, DescribeAcls shows it)
// until a read succeeds, logged at Error. Only a read that may succeed as
// it is (zkRetryable: outcome unknown, connection or session lost) stops
// the notification loop to be retried from that notification; anything
// else is logged and the loop moves on, so one bad notification never
// blocks later ones. A notification gone before it is read (purged by a
// broker whose clock runs ahead) or unreadable hides which resource
// changed, so the broker reloads every ACL.
//
// SCRAM (scram.go): WatchScramCredentials loads /config/users into a
// security.ScramCredentialCache and follows the users/<user> notifications
// through the one /config/changes children watch the session keeps anyway
// (refreshConfigChanges dispatches, then purges). ScramStore (ScramAdmin)
// is ZkAdminManager's Describe/AlterUserScramCredentials: Kafka's per-user
// refusals (security's sentinels), stored_key and server_key computed from
// the client's salt and salted password, one conditional write per user,
// then the notification, created and retried as the ACL one (also when a
// deletion finds the credential already gone: the call fails with
// CredentialNotFound, as Kafka, but repairs a lost notification). After a
// write whose outcome is unknown the next attempt accepts a znode already
// as this call would write it, or the credential already deleted. A user
// znode whose credentials do not parse, or that cannot be read (NOAUTH),
// removes that user's credentials from the cache (fail closed); a
// vanished or unreadable /config/changes notification reloads every user.
//
// Both watches read everything again after a new session: notifications
// purged while the session was away would otherwise be missed (Kafka's
// listener only resumes from the last one it processed). The writers
// re-read what they wrote into this broker's caches on the session
// goroutine before returning, so a broker sees its own change at once.
//
// ZooKeeper authentication: with Config.Digest the session sends
// AddAuth("digest", "user:password") before any other request;
// go-zookeeper re-sends it first on every reconnect and new session. With
// Config.SetACL (zookeeper.set.acl) every znode created through zkConn
// (Create and the creates in Multi, the chroot included) gets
// digest:<user>:<base64 sha1(user:password)> with all permissions plus
// world READ, except Kafka's sensitive paths (ZkData.SensitiveRootPaths:
// /config/users, /config/brokers, /delegation_token/tokens), which get no
// world access, and /consumers, which stays open as Kafka leaves it.
// Znodes that already exist keep their ACLs: turning set.acl on over an
// existing cluster leaves every znode made before it world-writable. Kafka
// needs zookeeper-security-migration (ZkSecurityMigrator) for that; this
// broker has no such tool, so secure those znodes with it (or zkCli
// setAcl) before relying on set.acl.
//
// The scheme differs from Kafka's. Kafka authenticates to ZooKeeper with
// SASL (the JAAS Client section, e.g. DigestLoginModule) and, with set.acl,
// writes sasl:<user> ALL; this broker authenticates with the digest scheme
// (AddAuth) from the same Client credentials and writes
// digest:<user>:<hash>. ZooKeeper treats the two as different identities:
// with zookeeper.set.acl on, a znode made by Kafka's own tools or brokers
// (kafka-configs, kafka-acls with a ZooKeeper connection) is not writable
// by this broker, nor ours by them, and the sensitive ones (no world READ:
// /config/users) are not even readable across the two. This broker then
// fails closed on what it cannot read (ACLs denied, credentials dropped,
// both logged at Error); mixing the two kinds of client on one secured
// ZooKeeper is not supported.
//
// # Concurrency contract
//
// One goroutine per Session (run) owns the ZooKeeper side: it reacts to
// session events, re-registers the broker after an expiry, campaigns for
// controller, reads every watched znode and is the only writer of the
// metadata cache. Watches are one-shot; each read re-arms the watch of what
// it read, and a tiny goroutine per armed watch forwards its single event
// to run over a bounded channel. Fires are tagged with a token, so watches
// of an expired session or of a dropped topic are ignored. Failed reads are
// retried every 500 ms. After a new session, run forgets all watches,
// resigns controllership, re-registers (a new broker epoch), re-enters the
// election and re-reads everything.
//
// The controller loop is a separate goroutine (see above). The session
// goroutine starts it on election and stops it on resignation without
// waiting (it may be inside a ZooKeeper call, and whatever it still writes
// is fenced); posting events to it never blocks, and it never waits on the
// session goroutine: when fenced it asks for resignation from a helper
// goroutine. Broker queue goroutines send outside every lock.
//
// The exported read methods (Brokers, Broker, TopicConfig, ControllerID,
// IsController, ControllerEpoch, BrokerEpoch) serve the cache
// under Session.mu, never wait on ZooKeeper, and return copies the caller
// owns. Changes delivers a value (buffer 1, never blocking) after each cache
// update. CreateTopic, DeleteTopic, InitProducerID and WriteLeaderAndIsr
// talk to ZooKeeper on the caller's goroutine; NotifyIsrChange only records
// (a propagation goroutine writes); ControlledShutdown runs on the
// controller loop and waits for it; Register runs on the session goroutine and waits
// for it. OnControllerChange is called on the session goroutine.
//
// Goroutines start through Session.goFunc, counted in a WaitGroup; Close
// closes the done channel every select watches, closes the ZooKeeper
// session (which deletes our ephemerals) and waits for them. Close is safe
// twice.
//
// # Lock order
//
//	ProducerIDManager.mu -> (ZooKeeper I/O, no Session lock)
//	Session.mu, controller.evMu and isrPropagation.mu are leaves: never held
//	across ZooKeeper I/O, a send, a callback or another lock.
//
// Goroutines never wait on each other in a cycle: session goroutine ->
// controller (post: non-blocking; stop: close only); controller loop ->
// broker queues (enqueue: non-blocking, drop when full); controller loop ->
// session goroutine only from a helper goroutine (resign when fenced).
//
// Fields marked "owned by the session goroutine" take no lock at all; the
// ACL and SCRAM watch state (Session.acl, Session.scram) is such a field:
// WatchACLs, WatchScramCredentials and the stores' post-write re-reads run
// on the session goroutine through Session.do. The stores' ZooKeeper
// writes run on the caller's goroutine; security.Authorizer and
// ScramCredentialCache take their own leaf locks.
//
// # Fencing
//
// The controller creates /controller in a multi with a conditional setData
// of /controller_epoch (epoch+1) and keeps the resulting zkVersion. Every
// controller write (partition state creation with its parent znodes, one
// multi each, state updates, ISR change notification deletes, topic
// deletion) is a multi that starts with a check of that zkVersion, and state updates
// are also conditional on the state's own zkVersion: BADVERSION on the
// state means a leader changed the ISR, so the loop re-reads and decides
// again; a failed epoch check, or a state znode written by a newer
// controller epoch, means another controller exists, and
// zk.ErrSessionExpired means our /controller is gone: the controller is
// fenced at once (nothing it still has to announce is sent), the loop
// stops, the
// session resigns and deletes /controller if it is still its own, and the
// election runs again (after an expiry, on the new session). Every request carries the controller epoch and the
// receiver's broker epoch, so brokers can refuse a deposed controller and
// requests meant for an earlier incarnation. Leader ISR writes carry no
// epoch check (as in Kafka); a leader whose zkVersion is stale gets
// partition.ErrStateConflict.
package zkcoord
