package zkcoord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/kafkazk/broker/security"
)

// SCRAM credentials in ZooKeeper, as Kafka keeps them: one config znode per
// user, /config/users/<sanitized user>, {"version":1,"config":{
// "SCRAM-SHA-256":"salt=..,stored_key=..,server_key=..,iterations=.."}}
// (quota keys may share it and are kept), each change announced by
// /config/changes/config_change_<seq> {"version":2,"entity_path":"users/<sanitized user>"}
// (AdminZkClient.changeConfigs). Brokers follow the notifications through
// the /config/changes children watch the session already keeps (watch.go
// refreshConfigChanges); this file is what they do for users/<user>.

// ScramCredentialInfo is one stored credential as DescribeUserScramCredentials
// shows it (protocol.ScramCredentialInfo's mirror).
type ScramCredentialInfo struct {
	Mechanism  security.ScramMechanism
	Iterations int32
}

// ScramUpsert is one AlterUserScramCredentials upsertion (protocol.ScramUpsert's
// mirror): the client sends the salt and the salted password, never the password.
type ScramUpsert struct {
	User           string
	Mechanism      security.ScramMechanism
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// ScramDeletion is one AlterUserScramCredentials deletion (protocol.ScramDeletion's mirror).
type ScramDeletion struct {
	User      string
	Mechanism security.ScramMechanism
}

// scramState is the session goroutine's SCRAM watch; owned by it.
type scramState struct {
	cache *security.ScramCredentialCache // nil until WatchScramCredentials
	seen  int64                          // the last /config/changes notification processed
	full  bool                           // a full reload is owed (new session, failed load)
}

// userEntityPrefix starts the entity_path of a user's config change.
const userEntityPrefix = "users/"

// defaultEntity is Kafka's ConfigEntityName.Default, the quota default; it
// has no credentials.
const defaultEntity = "<default>"

// WatchScramCredentials loads every /config/users/<sanitized user> into c,
// then follows the /config/changes notifications with entity_path
// users/<user> (not users/<user>/clients/<id> nor users/<default>, which
// carry quotas only, as Kafka's UserConfigHandler), re-reading the user's
// znode for each, in sequence order from the last one processed. It returns
// once the initial load is done; after a new session every user is read
// again. A user znode whose credentials do not parse removes that user's
// credentials from c (logged at Error): such a user cannot log in.
func (s *Session) WatchScramCredentials(ctx context.Context, c *security.ScramCredentialCache) error {
	if c == nil {
		return errors.New("zkcoord: WatchScramCredentials: nil cache")
	}
	return s.do(ctx, func() error {
		s.scram = scramState{cache: c, seen: -1, full: true}
		if err := s.syncScramCredentials(); err != nil {
			s.markDirty("load SCRAM credentials", err)
			return err
		}
		return nil
	})
}

// syncScramCredentials runs the full load if one is owed: it lists
// /config/changes first (arming its watch) and takes the newest
// notification as seen, then reads every user. Later notifications are
// processed by refreshConfigChanges. Caller is the session goroutine.
func (s *Session) syncScramCredentials() error {
	if s.scram.cache == nil || !s.scram.full {
		return nil
	}
	kids, err := s.readChildren(watchKey{kind: wConfigChanges}, configChangesPath)
	if err != nil {
		return err
	}
	last := int64(-1)
	for _, n := range sortedNotifications(kids, configChangeNamePrefix, -1) {
		last = n.seq
	}
	users, _, err := s.zk.Children(configUsersPath)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("load SCRAM credentials: children %s: %w", configUsersPath, err)
	}
	found := map[string]bool{}
	for _, u := range users {
		name, err := s.refreshUser(u)
		if err != nil {
			return err
		}
		found[name] = true
	}
	for _, u := range s.scram.cache.Users() {
		if !found[u] {
			s.scram.cache.SetUser(u, nil)
		}
	}
	s.scram.seen = last
	s.scram.full = false
	s.log.Info().Int("users", len(users)).Msg("loaded SCRAM credentials from zookeeper")
	return nil
}

// processUserConfigChanges handles the /config/changes notifications newer
// than the last processed, in sequence order: users/<user> re-reads the
// user. Other entity paths (topics, brokers, clients, quotas) are not this
// watch's. A notification that vanished before it was read or cannot be
// read (NOAUTH) hides which user changed, so every user is read again; a
// read that may succeed when retried (zkRetryable) stops here and is
// retried from that notification. Caller is the session goroutine.
func (s *Session) processUserConfigChanges(kids []string) error {
	if s.scram.cache == nil || s.scram.full {
		return nil
	}
	for _, n := range sortedNotifications(kids, configChangeNamePrefix, s.scram.seen) {
		p := configChangeNotificationPath(n.name)
		if s.beforeNotificationRead != nil {
			s.beforeNotificationRead(p)
		}
		data, _, err := s.zk.Get(p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			// Purged before this broker read it (a broker whose clock
			// runs ahead): whatever user it named, read them all again.
			s.log.Warn().Str("zk_path", p).Msg("config change notification vanished before it was read: reloading every SCRAM credential")
			s.scram.full = true
		case err != nil && zkRetryable(err):
			return fmt.Errorf("read config change: get %s: %w", p, err)
		case err != nil:
			s.log.Error().Err(err).Str("zk_path", p).Msg("config change notification cannot be read: reloading every SCRAM credential")
			s.scram.full = true
		default:
			entity, derr := security.DecodeConfigChange(data)
			if derr != nil {
				s.log.Error().Err(derr).Str("zk_path", p).Msg("ignoring config change notification")
				break
			}
			if user, ok := userEntity(entity); ok {
				if _, err := s.refreshUser(user); err != nil {
					return err
				}
			}
		}
		s.scram.seen = n.seq
		if s.scram.full {
			return s.syncScramCredentials()
		}
	}
	return nil
}

// userEntity picks the sanitized user of a users/<user> entity path; false
// for anything else, users/<default> and users/<user>/clients/<id> included.
func userEntity(entityPath string) (string, bool) {
	u, ok := strings.CutPrefix(entityPath, userEntityPrefix)
	if !ok || u == "" || u == defaultEntity || strings.Contains(u, "/") {
		return "", false
	}
	return u, true
}

// refreshUser reads /config/users/<sanitized> into the cache and returns
// the user's name. A read that may succeed when retried (zkRetryable)
// returns its error; one that cannot (NOAUTH) drops the user's cached
// credentials (logged at Error): fail closed, the user cannot log in until
// the znode reads. Caller is the session goroutine.
func (s *Session) refreshUser(sanitized string) (string, error) {
	user, err := security.DesanitizeEntityName(sanitized)
	if err != nil {
		s.log.Error().Err(err).Str("zk_path", configUserPath(sanitized)).Msg("ignoring user config")
		return sanitized, nil
	}
	p := configUserPath(sanitized)
	data, _, err := s.zk.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		s.scram.cache.SetUser(user, nil)
		return user, nil
	}
	if err != nil {
		err = fmt.Errorf("read SCRAM credentials: get %s: %w", p, err)
		if zkRetryable(err) {
			return user, err
		}
		s.log.Error().Err(err).Str("zk_path", p).Msg("user config cannot be read: removing the user's SCRAM credentials")
		s.scram.cache.SetUser(user, nil)
		return user, nil
	}
	creds, err := security.DecodeUserScramCredentials(data)
	if err != nil {
		s.log.Error().Err(err).Str("zk_path", p).Msg("user config does not parse: removing the user's SCRAM credentials")
		creds = nil
	}
	s.scram.cache.SetUser(user, creds)
	s.log.Debug().Str("zk_path", p).Int("credentials", len(creds)).Msg("read SCRAM credentials")
	return user, nil
}

// ScramAdmin returns the SCRAM credential writer of this session
// (protocol.ScramAdmin's method set; cmd/broker adapts).
func (s *Session) ScramAdmin() *ScramStore { return &ScramStore{s: s, z: s.zk, log: s.log} }

// ScramStore reads and writes SCRAM credentials under /config/users, as
// Kafka's ZkAdminManager does for Describe/AlterUserScramCredentials. Safe
// for concurrent use: writes are conditional on the znode version.
type ScramStore struct {
	s   *Session // nil in unit tests: no cache to refresh
	z   aclZK
	log zerolog.Logger
}

// DescribeScramUsers returns the credentials of users, read from
// ZooKeeper (not the cache), by user name. nil or empty users: every user
// with a credential. A named user without credentials is absent (protocol
// answers RESOURCE_NOT_FOUND). A credential string that does not parse is
// left out and logged. The error is ZooKeeper's.
func (st *ScramStore) DescribeScramUsers(ctx context.Context, users []string) (map[string][]ScramCredentialInfo, error) {
	var sanitized []string
	if len(users) == 0 {
		kids, _, err := st.z.Children(configUsersPath)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("describe SCRAM users: children %s: %w", configUsersPath, err)
		}
		sanitized = kids
	} else {
		for _, u := range users {
			if u != "" {
				sanitized = append(sanitized, security.SanitizeEntityName(u))
			}
		}
	}
	out := map[string][]ScramCredentialInfo{}
	for _, su := range sanitized {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		user, err := security.DesanitizeEntityName(su)
		if err != nil {
			continue
		}
		cfg, _, err := readEntityConfig(st.z, configUserPath(su))
		if err != nil {
			return nil, fmt.Errorf("describe SCRAM users: %w", err)
		}
		var infos []ScramCredentialInfo
		for _, m := range security.ScramMechanisms {
			v, ok := cfg[m.Name()]
			if !ok {
				continue
			}
			cred, err := security.ParseScramCredential(v)
			if err != nil {
				st.log.Error().Err(err).Str("zk_path", configUserPath(su)).Stringer("mechanism", m).
					Msg("describe SCRAM users: credential does not parse")
				continue
			}
			infos = append(infos, ScramCredentialInfo{Mechanism: m, Iterations: int32(cred.Iterations)})
		}
		if len(infos) > 0 {
			out[user] = infos
		}
	}
	return out, nil
}

// AlterScramUsers applies upserts and deletions as Kafka's
// ZkAdminManager.alterUserScramCredentials, with one conditional write of
// /config/users/<sanitized user> per user followed by its /config/changes
// notification. The result has an entry for every user named, nil for
// success, else wrapping: security.ErrUnacceptableCredential (empty user,
// iterations outside [4096, 16384], empty salt or salted password),
// security.ErrUnsupportedMechanism (unknown mechanism),
// security.ErrDuplicateResource (the same user and mechanism twice),
// security.ErrCredentialNotFound (deleting a credential that does not
// exist), or ZooKeeper's error. A user with any refused part is not
// written at all. The salted password is turned into stored_key and
// server_key here; neither it nor the password is stored.
func (st *ScramStore) AlterScramUsers(ctx context.Context, upserts []ScramUpsert, deletions []ScramDeletion) map[string]error {
	out := map[string]error{}
	fail := func(user string, err error) {
		if out[user] == nil {
			out[user] = err
		}
	}
	creds := map[string]map[security.ScramMechanism]security.ScramCredential{}
	dels := map[string][]security.ScramMechanism{}
	pairs := map[string]map[security.ScramMechanism]int{}
	var order []string
	note := func(user string, m security.ScramMechanism) {
		if _, ok := out[user]; !ok {
			out[user] = nil
			order = append(order, user)
		}
		if pairs[user] == nil {
			pairs[user] = map[security.ScramMechanism]int{}
		}
		pairs[user][m]++
	}
	for _, u := range upserts {
		note(u.User, u.Mechanism)
		if u.User == "" {
			fail(u.User, fmt.Errorf("username must not be empty: %w", security.ErrUnacceptableCredential))
			continue
		}
		cred, err := security.ScramCredentialFromSaltedPassword(u.Mechanism, u.Salt, u.SaltedPassword, int(u.Iterations))
		if err != nil {
			fail(u.User, err)
			continue
		}
		if creds[u.User] == nil {
			creds[u.User] = map[security.ScramMechanism]security.ScramCredential{}
		}
		creds[u.User][u.Mechanism] = cred
	}
	for _, d := range deletions {
		note(d.User, d.Mechanism)
		switch {
		case d.User == "":
			fail(d.User, fmt.Errorf("username must not be empty: %w", security.ErrUnacceptableCredential))
		case !d.Mechanism.Valid():
			fail(d.User, fmt.Errorf("unknown SCRAM mechanism %d: %w", d.Mechanism, security.ErrUnsupportedMechanism))
		default:
			dels[d.User] = append(dels[d.User], d.Mechanism)
		}
	}
	for user, ms := range pairs {
		for _, n := range ms {
			if n > 1 && out[user] == nil {
				out[user] = fmt.Errorf("a user credential cannot be altered twice in the same request: %w", security.ErrDuplicateResource)
			}
		}
	}
	for _, user := range order {
		if out[user] != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			out[user] = err
			continue
		}
		out[user] = st.alterUser(ctx, user, creds[user], dels[user])
	}
	return out
}

// alterUser writes one user's credential changes conditionally on the
// znode version, retrying when another writer changed it, re-reads this
// broker's cache (also on the error path), then creates the
// /config/changes notification. After a write whose outcome is unknown the
// retry accepts what it reads: a deletion finding the credential gone, or
// a znode already as this call would write it, is this call's write. A
// deletion of a credential that is not there still notifies before it
// fails with ErrCredentialNotFound: that repairs an earlier call whose
// notification was lost (the client retries, finds it gone), and a
// duplicate is harmless. The notification create is retried while its
// outcome is unknown, bounded only by the session closing
// (createNotification).
func (st *ScramStore) alterUser(ctx context.Context, user string, set map[security.ScramMechanism]security.ScramCredential, del []security.ScramMechanism) error {
	su := security.SanitizeEntityName(user)
	p := configUserPath(su)
	written, err := st.writeUser(ctx, user, p, set, del)
	st.refreshOwnCache(ctx, su, p)
	if err != nil && !written && !errors.Is(err, security.ErrCredentialNotFound) {
		return err
	}
	if nerr := createNotification(st.z, st.done(), configChangeSequencePrefix, security.EncodeConfigChange(userEntityPrefix+su)); nerr != nil {
		return errors.Join(err, fmt.Errorf("alter SCRAM credentials of %s: written but not announced: %w", user, nerr))
	}
	if err != nil {
		return err
	}
	st.log.Info().Str("zk_path", p).Int("upserted", len(set)).Int("deleted", len(del)).Msg("changed SCRAM credentials")
	return nil
}

// writeUser is alterUser's conditional write; written reports whether the
// znode may have been written (also when the error says the retries ran
// out after a write whose outcome is unknown).
func (st *ScramStore) writeUser(ctx context.Context, user, p string, set map[security.ScramMechanism]security.ScramCredential, del []security.ScramMechanism) (written bool, err error) {
	uncertain := false
	for attempt := 0; attempt < aclMaxUpdateRetries; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, randBackoff()); err != nil {
				return uncertain, err
			}
		}
		cfg, version, err := readEntityConfig(st.z, p)
		if err != nil {
			if outcomeUnknown(err) {
				continue
			}
			return uncertain, fmt.Errorf("alter SCRAM credentials of %s: %w", user, err)
		}
		before := security.EncodeEntityConfig(cfg)
		for _, m := range del {
			if _, ok := cfg[m.Name()]; !ok {
				if uncertain {
					continue // our lost-answer write deleted it
				}
				return false, fmt.Errorf("attempt to delete a %s credential of %s that does not exist: %w", m, user, security.ErrCredentialNotFound)
			}
			cfg = security.DeleteScramCredential(cfg, m)
		}
		for _, m := range slices.Sorted(maps.Keys(set)) {
			cfg = security.SetScramCredential(cfg, m, set[m])
		}
		data := security.EncodeEntityConfig(cfg)
		if uncertain && version >= 0 && string(before) == string(data) {
			return true, nil // our lost-answer write landed
		}
		if version < 0 {
			_, err = st.z.Create(p, data, 0)
			if errors.Is(err, zk.ErrNoNode) {
				if perr := createParents(st.z, p); perr != nil {
					return uncertain, fmt.Errorf("alter SCRAM credentials of %s: %w", user, perr)
				}
				continue
			}
		} else {
			_, err = st.z.Set(p, data, version)
		}
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
		case outcomeUnknown(err):
			// Unknown outcome: read it back; when that read fails too,
			// the next attempt's read decides (uncertain).
			uncertain = true
			if landed, _ := scramWriteLanded(st.z, p, data); landed {
				return true, nil
			}
		default:
			return uncertain, fmt.Errorf("alter SCRAM credentials of %s: write %s: %w", user, p, err)
		}
	}
	return uncertain, fmt.Errorf("alter SCRAM credentials of %s: %w after %d attempts", user, ErrConcurrentModification, aclMaxUpdateRetries)
}

// done is the session's closing channel; nil (never) without a session.
func (st *ScramStore) done() <-chan struct{} {
	if st.s == nil {
		return nil
	}
	return st.s.done
}

// refreshOwnCache re-reads the user into this broker's credential cache,
// if WatchScramCredentials made one, even when ctx is cancelled.
func (st *ScramStore) refreshOwnCache(ctx context.Context, su, p string) {
	if st.s == nil {
		return
	}
	if err := st.s.do(context.WithoutCancel(ctx), func() error {
		if st.s.scram.cache == nil {
			return nil
		}
		_, err := st.s.refreshUser(su)
		return err
	}); err != nil {
		st.log.Warn().Err(err).Str("zk_path", p).Msg("re-reading SCRAM credentials after writing them; the notification will")
	}
}

// scramWriteLanded reads p back after a write of unknown outcome.
func scramWriteLanded(z aclZK, p string, data []byte) (bool, error) {
	got, _, err := z.Get(p)
	if err != nil {
		return false, err
	}
	return string(got) == string(data), nil
}

// readEntityConfig reads a config znode; version -1 when it is missing.
func readEntityConfig(z aclZK, p string) (map[string]string, int32, error) {
	data, stat, err := z.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return map[string]string{}, -1, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("get %s: %w", p, err)
	}
	cfg, err := security.DecodeEntityConfig(data)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", p, err)
	}
	return cfg, stat.Version, nil
}
