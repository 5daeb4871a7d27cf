// Package harness runs broker processes for the black-box tests (test/)
// and the fault-injection harness (internal/chaos): one Process per broker
// with its server.properties rewritten at every start, stdout and stderr
// appended to one log file, its own process group (so a signal reaches
// only it) and SIGKILL when the harness dies (Pdeathsig); the signals a
// fault needs (SIGKILL, SIGTERM with a deadline, SIGSTOP and SIGCONT); and
// Ready, the one readiness probe: the broker's /brokers/ids/<id> znode
// exists and Metadata through its listener names it.
//
// Callers keep their own cluster shapes: test/ binds each broker's
// listener directly, internal/chaos puts a fault proxy in front of it.
// ZooKeeper for both comes from internal/zktest.
package harness
