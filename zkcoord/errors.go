package zkcoord

import (
	"errors"

	"github.com/kafkazk/broker/cluster"
)

var (
	// ErrBrokerIDInUse is returned by Register (and logged after a session
	// expiry) when /brokers/ids/<id> is owned by another live session.
	ErrBrokerIDInUse = errors.New("zkcoord: broker id in use")
	// ErrNotController is returned by controller-only writes when this
	// broker is not, or is no longer, the controller (a failed check on the
	// /controller_epoch zkVersion). It is cluster.ErrNotController, so
	// protocol maps it without importing zkcoord.
	ErrNotController = cluster.ErrNotController
	// ErrNoSession is returned by Connect when no ZooKeeper session was
	// established within the connection timeout.
	ErrNoSession = errors.New("zkcoord: no zookeeper session")
	// ErrBadConnect is returned by Connect for a malformed zookeeper.connect.
	ErrBadConnect = errors.New("zkcoord: bad zookeeper.connect")
	// ErrBadZKAuth is returned by Connect for zookeeper.set.acl without
	// digest credentials, or credentials that cannot be used.
	ErrBadZKAuth = errors.New("zkcoord: bad zookeeper authentication config")
	// ErrClosed is returned by calls on a closed Session.
	ErrClosed = errors.New("zkcoord: session closed")
	// ErrClusterIDMissing is returned when /cluster/id disappears; Kafka
	// refuses to run without it.
	ErrClusterIDMissing = errors.New("zkcoord: /cluster/id is missing")
	// ErrProducerIDsExhausted is returned by InitProducerID when the int64
	// space of producer ids has been used up.
	ErrProducerIDsExhausted = errors.New("zkcoord: producer ids exhausted")
)
