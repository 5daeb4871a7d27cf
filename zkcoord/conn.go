package zkcoord

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"
)

// zkConn is a go-zookeeper connection rooted at a chroot. go-zookeeper does
// not implement chroots, so every path on the way out gets the prefix here.
type zkConn struct {
	c      *zk.Conn
	chroot string // "" or "/kafka"
	// secureACL, when set (zookeeper.set.acl), is the broker's own digest
	// ACL with every permission: aclFor gives it to every znode created
	// through this connection, with world READ unless the path is
	// sensitive. nil creates every znode open, as Kafka without set.acl.
	secureACL []zk.ACL
}

var openACL = zk.WorldACL(zk.PermAll)

// sensitiveRootPaths are the paths whose znodes no one but the brokers may
// read under zookeeper.set.acl (Kafka's ZkData.SensitiveRootPaths: the
// SCRAM credentials and dynamic broker configs, which hold passwords, and
// the delegation tokens). A path is sensitive if it starts with one, as
// Kafka's sensitivePath checks.
var sensitiveRootPaths = []string{configUsersPath, configBrokersPath, delegationTokensPath}

// sensitivePath reports whether p, relative to the chroot, is sensitive.
func sensitivePath(p string) bool {
	for _, r := range sensitiveRootPaths {
		if strings.HasPrefix(p, r) {
			return true
		}
	}
	return false
}

// aclFor is the ACL of a znode created at p (relative to the chroot), as
// Kafka's ZkData.defaultAcls: open without set.acl and for /consumers
// (the old consumers write under it); otherwise the broker's digest with
// every permission, plus world READ unless p is sensitive.
func (z *zkConn) aclFor(p string) []zk.ACL {
	if z.secureACL == nil || p == consumersPath {
		return openACL
	}
	acl := append([]zk.ACL(nil), z.secureACL...)
	if !sensitivePath(p) {
		acl = append(acl, zk.WorldACL(zk.PermRead)...)
	}
	return acl
}

func (z *zkConn) abs(p string) string { return z.chroot + p }

// rel strips the chroot from a path the server returned.
func (z *zkConn) rel(p string) string { return strings.TrimPrefix(p, z.chroot) }

func (z *zkConn) Get(p string) ([]byte, *zk.Stat, error) { return z.c.Get(z.abs(p)) }

func (z *zkConn) GetW(p string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	return z.c.GetW(z.abs(p))
}

func (z *zkConn) ExistsW(p string) (bool, *zk.Stat, <-chan zk.Event, error) {
	return z.c.ExistsW(z.abs(p))
}

func (z *zkConn) Exists(p string) (bool, *zk.Stat, error) { return z.c.Exists(z.abs(p)) }

func (z *zkConn) Children(p string) ([]string, *zk.Stat, error) { return z.c.Children(z.abs(p)) }

func (z *zkConn) ChildrenW(p string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	return z.c.ChildrenW(z.abs(p))
}

func (z *zkConn) Set(p string, data []byte, version int32) (*zk.Stat, error) {
	return z.c.Set(z.abs(p), data, version)
}

func (z *zkConn) Create(p string, data []byte, flags int32) (string, error) {
	s, err := z.c.Create(z.abs(p), data, flags, z.aclFor(p))
	return z.rel(s), err
}

func (z *zkConn) Delete(p string, version int32) error { return z.c.Delete(z.abs(p), version) }

// Multi runs ops atomically after rooting their paths. The returned error is
// the first failing op's error.
func (z *zkConn) Multi(ops ...any) ([]zk.MultiResponse, error) {
	rooted := make([]any, len(ops))
	for i, op := range ops {
		switch o := op.(type) {
		case *zk.CreateRequest:
			c := *o
			if c.Acl == nil {
				c.Acl = z.aclFor(c.Path)
			}
			c.Path = z.abs(c.Path)
			rooted[i] = &c
		case *zk.SetDataRequest:
			c := *o
			c.Path = z.abs(c.Path)
			rooted[i] = &c
		case *zk.DeleteRequest:
			c := *o
			c.Path = z.abs(c.Path)
			rooted[i] = &c
		case *zk.CheckVersionRequest:
			c := *o
			c.Path = z.abs(c.Path)
			rooted[i] = &c
		default:
			return nil, fmt.Errorf("zkcoord: multi op %T", op)
		}
	}
	res, err := z.c.Multi(rooted...)
	if err == nil {
		for _, r := range res {
			if r.Error != nil {
				err = r.Error
				break
			}
		}
	}
	return res, err
}

// createPersistent creates an empty persistent node, ignoring NODEEXISTS.
func (z *zkConn) createPersistent(p string) error {
	if _, err := z.Create(p, nil, 0); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}

// parseConnect splits zookeeper.connect ("h:p,h:p/chroot") into its
// servers and optional chroot ("" for none).
func parseConnect(s string) (servers []string, chroot string, err error) {
	hosts := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		hosts, chroot = s[:i], strings.TrimRight(s[i:], "/")
		if strings.Contains(chroot, "//") {
			return nil, "", fmt.Errorf("%w: %q: empty chroot path element", ErrBadConnect, s)
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, "", fmt.Errorf("%w: %q: empty server", ErrBadConnect, s)
		}
		servers = append(servers, h)
	}
	return servers, chroot, nil
}

// zkLogger routes go-zookeeper's log lines to zerolog at Debug.
type zkLogger struct{ log zerolog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Debug().Str("component", "go-zookeeper").Msgf(format, args...)
}
