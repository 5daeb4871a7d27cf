package zkcoord

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Sequential change notifications (/config/changes, /kafka-acl-changes,
// /kafka-acl-extended-changes), handled as Kafka's
// ZkNodeChangeNotificationListener does: on every change of the children,
// process in sequence order each notification newer than the last one
// processed, then purge those created more than 15 minutes ago. One
// children watch per root, re-armed by the session goroutine's read, is the
// only listener; what a notification makes us re-read depends on the root.

// seqNode is one sequential notification by name and sequence number.
type seqNode struct {
	name string
	seq  int64
}

// sortedNotifications picks the children named prefix<seq> with a sequence
// above after, in sequence order. Other names are not notifications.
func sortedNotifications(kids []string, prefix string, after int64) []seqNode {
	var out []seqNode
	for _, k := range kids {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		seq, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || seq <= after {
			continue
		}
		out = append(out, seqNode{k, seq})
	}
	slices.SortFunc(out, func(a, b seqNode) int { return int(min(max(a.seq-b.seq, -1), 1)) })
	return out
}

// purgeNotifications deletes every notification under root created more
// than cfg.configChangeExpiration ago, by the znode's ctime against this
// broker's clock (purgeObsoleteNotifications). Every broker purges, racing
// harmlessly; the age alone is what gives every broker, and Kafka's own,
// the time to read a notification first. Sequence order is creation order,
// so the purge stops at the first notification young enough to keep. A
// failed read or delete is logged and ends this purge, as Kafka logs it:
// the next notification or session tries again.
func (s *Session) purgeNotifications(root, prefix string, kids []string) {
	now := time.Now()
	purged := 0
	for _, n := range sortedNotifications(kids, prefix, -1) {
		p := root + "/" + n.name
		exists, stat, err := s.zk.Exists(p)
		if err != nil {
			s.log.Warn().Err(err).Str("zk_path", p).Msg("purging change notifications: exists")
			break
		}
		if !exists {
			continue // another broker purged it
		}
		if now.Sub(time.UnixMilli(stat.Ctime)) <= s.cfg.configChangeExpiration {
			break // this one and every later one are young enough to keep
		}
		if err := s.zk.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			s.log.Warn().Err(err).Str("zk_path", p).Msg("purging change notifications: delete")
			break
		}
		purged++
	}
	if purged > 0 {
		s.log.Debug().Str("zk_path", root).Int("purged", purged).Msg("purged expired change notifications")
	}
}
