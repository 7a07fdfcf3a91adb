package policy

import (
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// User is the authenticated subject of a request, as kube-apiserver puts it
// in AdmissionRequest.userInfo.
type User struct {
	Username string
	Groups   []string
}

// subjectSet is a compiled Subjects: exact-match lookups only.
type subjectSet struct {
	users  map[string]struct{}
	groups map[string]struct{}
}

func compileSubjects(s guardapi.Subjects) subjectSet {
	set := subjectSet{users: map[string]struct{}{}, groups: map[string]struct{}{}}
	for _, sa := range s.ServiceAccounts {
		set.users[guardapi.ServiceAccountUsername(sa)] = struct{}{}
	}
	for _, u := range s.Users {
		set.users[u] = struct{}{}
	}
	for _, g := range s.Groups {
		set.groups[g] = struct{}{}
	}
	return set
}

// matches reports whether the user is in the set, by whole username or by
// one whole group. There is deliberately no prefix matching: trusting every
// service account whose name starts with something is how guards get bypassed.
func (s subjectSet) matches(u User) bool {
	if _, ok := s.users[u.Username]; ok {
		return true
	}
	for _, g := range u.Groups {
		if _, ok := s.groups[g]; ok {
			return true
		}
	}
	return false
}

// IsBreakGlass reports whether the user is one of the configuration's
// break-glass subjects (exact matching, as everywhere).
func (c *Mappings) IsBreakGlass(u User) bool { return c.breakGlass.matches(u) }
