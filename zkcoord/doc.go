// Package zkcoord is the broker's ZooKeeper layer: the session, broker
// registration, controller election, the metadata cache fed by watches,
// topic administration and producer-id blocks. It owns every znode path
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
//	/admin/delete_topics/<t>  P  empty
//	/cluster/id               P  {"version":"1","id":"<22-char base64url uuid>"}
//	/latest_producer_id_block P  {"version":1,"broker":N,"block_start":"S","block_end":"E"}
//
// Readers accept older versions (topic version 1, registrations without
// endpoints) and ignore unknown fields. zookeeper.connect may carry a
// chroot, which zkcoord creates and prefixes itself (go-zookeeper has none).
//
// # What it refuses to do
//
// It does not send LeaderAndIsr or UpdateMetadata, elect partition leaders
// after broker failures, or touch logs: the controller's duties beyond
// election and topic deletion come later. It imports no protocol, logstore
// or partition code.
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
// The exported read methods (Brokers, Topics, Topic, TopicConfig,
// ControllerID, IsController, ControllerEpoch, BrokerEpoch) serve the cache
// under Session.mu, never wait on ZooKeeper, and return copies the caller
// owns. Changes delivers a value (buffer 1, never blocking) after each cache
// update. CreateTopic, DeleteTopic and InitProducerID talk to ZooKeeper on
// the caller's goroutine; Register runs on the session goroutine and waits
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
//	Session.mu is a leaf: never held across ZooKeeper I/O or a callback.
//
// Fields marked "owned by the session goroutine" take no lock at all.
//
// # Fencing
//
// The controller creates /controller in a multi with a conditional setData
// of /controller_epoch (epoch+1) and keeps the resulting zkVersion; its
// topic deletions carry a check on that zkVersion, so a deposed controller
// cannot complete them.
package zkcoord
