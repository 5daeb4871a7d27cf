package protocol

import (
	"context"
	"sort"
	"sync"

	"github.com/kafkazk/broker/security"
)

// fakeScramAdmin is an in-memory ScramAdmin: mechanisms and iterations
// per user, and every AlterScramUsers call.
type fakeScramAdmin struct {
	mu     sync.Mutex
	users  map[string]map[security.ScramMechanism]int32
	alters []fakeScramAlter
	// failUser, when set, makes AlterScramUsers fail that user.
	failUser string
}

type fakeScramAlter struct {
	upserts   []ScramUpsert
	deletions []ScramDeletion
}

func newFakeScramAdmin() *fakeScramAdmin {
	return &fakeScramAdmin{users: map[string]map[security.ScramMechanism]int32{}}
}

func (f *fakeScramAdmin) DescribeScramUsers(_ context.Context, users []string) (map[string][]ScramCredentialInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if users == nil {
		for u := range f.users {
			users = append(users, u)
		}
	}
	out := map[string][]ScramCredentialInfo{}
	for _, u := range users {
		var infos []ScramCredentialInfo
		for m, it := range f.users[u] {
			infos = append(infos, ScramCredentialInfo{Mechanism: m, Iterations: it})
		}
		sort.Slice(infos, func(i, j int) bool { return infos[i].Mechanism < infos[j].Mechanism })
		if len(infos) > 0 {
			out[u] = infos
		}
	}
	return out, nil
}

func (f *fakeScramAdmin) AlterScramUsers(_ context.Context, upserts []ScramUpsert, deletions []ScramDeletion) map[string]error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alters = append(f.alters, fakeScramAlter{upserts, deletions})
	out := map[string]error{}
	for _, d := range deletions {
		delete(f.users[d.User], d.Mechanism)
	}
	for _, u := range upserts {
		if u.User == f.failUser {
			out[u.User] = context.DeadlineExceeded
			continue
		}
		if f.users[u.User] == nil {
			f.users[u.User] = map[security.ScramMechanism]int32{}
		}
		f.users[u.User][u.Mechanism] = u.Iterations
	}
	return out
}

func (f *fakeScramAdmin) calls() []fakeScramAlter {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeScramAlter(nil), f.alters...)
}

// fakeACLAdmin applies ACL changes to a *security.Authorizer directly, as
// zkcoord's store does through ZooKeeper and the change notifications.
type fakeACLAdmin struct {
	a *security.Authorizer
}

func (f *fakeACLAdmin) CreateACLs(_ context.Context, bindings []security.ACLBinding) []error {
	errs := make([]error, len(bindings))
	for _, b := range bindings {
		cur, _ := f.a.ResourceACLs(b.Pattern)
		f.a.SetResourceACLs(b.Pattern, security.AddACLs(cur.ACLs, []security.ACE{b.Entry}), cur.ZkVersion+1)
	}
	return errs
}

func (f *fakeACLAdmin) DeleteACLs(_ context.Context, filters []security.ACLBindingFilter) ([][]security.ACLBinding, []error) {
	deleted := make([][]security.ACLBinding, len(filters))
	for _, p := range f.a.DeleteCandidates(filters) {
		cur, _ := f.a.ResourceACLs(p)
		remaining, del := security.RemoveMatching(p, cur.ACLs, filters)
		for i := range del {
			deleted[i] = append(deleted[i], del[i]...)
		}
		f.a.SetResourceACLs(p, remaining, cur.ZkVersion+1)
	}
	return deleted, make([]error, len(filters))
}
