// Package zktest starts a real, standalone ZooKeeper server for tests.
//
// Tests call Start, which returns the address of a server that lives until
// the test ends. When BROKER_TEST_ZK is set (host:port) that server is used
// instead and each caller gets its own chroot. Otherwise a server is started
// from Debian's zookeeper package (/usr/share/java/zookeeper.jar) with the
// machine's Java on a free loopback port and a temporary data directory. When
// neither is available the test is skipped with a message saying what to
// install. Only processes started here are stopped here.
package zktest
