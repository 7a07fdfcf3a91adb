package v1alpha1

import (
	"slices"
	"strings"
)

// ServiceAccountUsername returns the username kube-apiserver gives the
// service account "namespace/name".
func ServiceAccountUsername(namespacedName string) string {
	ns, name, _ := strings.Cut(namespacedName, "/")
	return "system:serviceaccount:" + ns + ":" + name
}

// ServiceAccountOf is the inverse of ServiceAccountUsername: the namespace
// and name of a "system:serviceaccount:<ns>:<name>" username.
func ServiceAccountOf(username string) (ns, name string, ok bool) {
	rest, found := strings.CutPrefix(username, "system:serviceaccount:")
	if !found {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	return ns, name, ok && ns != "" && name != ""
}

// SplitServiceAccount splits "namespace/name"; ok is false unless both
// parts are non-empty and the name holds no further "/".
func SplitServiceAccount(sa string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(sa, "/")
	return ns, name, ok && ns != "" && name != "" && !strings.Contains(name, "/")
}

// OwnerMode is the mode an owner mapping runs in: its own, or the default.
// The webhook and the policy shape's generated policies both take it from here.
func (s *GuardConfig) OwnerMode(o *Owner) Mode {
	if o.Mode != "" {
		return o.Mode
	}
	return s.DefaultMode
}

// OwnerWriters are the subjects allowed to write an owner's configurations:
// its writers, plus cert-manager's cainjector when the CA is injected by
// cert-manager. The webhook and the policy shape's generated policies both take
// them from here, so the two cannot enforce different writers.
func (s *GuardConfig) OwnerWriters(o *Owner) Subjects {
	w := o.Writers
	if o.CA.InjectedByCertManager != nil {
		w.ServiceAccounts = append(slices.Clone(w.ServiceAccounts), s.CertManager.CAInjectorServiceAccount)
	}
	return w
}
