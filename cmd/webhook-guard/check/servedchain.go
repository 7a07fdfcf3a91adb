package check

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/probe"
	"github.com/webhook-guard/webhook-guard/webhook/servedchain"
)

// servedChains is --served-chain's [ENTRY=]FILE values as admission's
// serving check: each file is what the reviewed object's entry (every
// entry when ENTRY is left out) serves, so that the write is decided as the
// server decides it after a probe round: the warning, or with
// verifyServing: deny the refusal, of a caBundle that does not verify it.
// Each chain is verified for the server name of the entry the review
// writes (its URL's host, or <service>.<namespace>.svc), read by the
// server's own decoder as it decides: the review is decoded once.
type servedChains struct {
	flags  []string
	chains probe.Chains
}

// readServedChains reads the files the flags name (nil for no flag); a
// file that holds no usable chain is invalid input.
func readServedChains(flags []string) (*servedChains, error) {
	if len(flags) == 0 {
		return nil, nil //nolint:nilnil // no --served-chain: nothing to check against
	}
	s := &servedChains{flags: flags}
	for _, flag := range flags {
		entry, file := splitServedChain(flag)
		pemChain, err := os.ReadFile(file)
		if err != nil {
			return nil, cmdutil.Invalid("--served-chain %s: %v", flag, err)
		}
		// The base name: the detail goes into a warning cut at 256 characters.
		if err := s.chains.Add(entry, "file "+filepath.Base(file), pemChain); err != nil {
			return nil, cmdutil.Invalid("--served-chain %s: %v", flag, err)
		}
	}
	return s, nil
}

// splitServedChain splits [ENTRY=]FILE.
func splitServedChain(flag string) (entry, file string) {
	if entry, file, named := strings.Cut(flag, "="); named {
		return entry, file
	}
	return "", flag
}

// servingCheck is s as the handler's serving check; nil for no chains.
func (s *servedChains) servingCheck() policy.ServingCheck {
	if s == nil {
		return nil
	}
	return s
}

// CheckServing implements policy.ServingCheck.
func (s *servedChains) CheckServing(_ policy.GuardedKind, _ string, entry policy.Entry) (verified, known bool, detail string) {
	if entry.InsecureSkipTLSVerify {
		return false, false, "" // kube-apiserver verifies nothing, and the prober probes nothing
	}
	return s.chains.Check(entry.Name, endpointOf(entry.Endpoint), entry.CABundle, time.Now())
}

// endpointOf is an entry's endpoint as the verifier reads it.
func endpointOf(e policy.Endpoint) servedchain.Endpoint {
	if e.Namespace == "" && e.Name == "" {
		return servedchain.Endpoint{URL: e.URL}
	}
	return servedchain.Endpoint{Service: &servedchain.Service{Namespace: e.Namespace, Name: e.Name, Port: e.Port}}
}

// check says why the chains could not apply to the decided review: it
// writes no object, no mapping guards the object, or an ENTRY names no
// entry of it. Nothing to say without chains, or without a decision (the
// review's own error is then the one to report).
func (s *servedChains) check(v webhook.Verdict) error {
	d := v.Decision
	switch {
	case s == nil || d == nil:
		return nil
	case d.Kind.IsAdmissionPolicyObject():
		return cmdutil.Invalid("--served-chain: a %s has no entry kube-apiserver calls over TLS", d.Kind)
	case d.Operation == policy.OperationDelete:
		return cmdutil.Invalid("--served-chain: the review has no request.object (a DELETE writes no caBundle)")
	case d.Mapping == "":
		return cmdutil.Invalid("--served-chain: no mapping guards %s %q, so no entry of it is checked against a served chain", d.Kind, d.Name)
	}
	var names []string
	for _, e := range v.Entries {
		if !e.InsecureSkipTLSVerify {
			names = append(names, e.Name)
		}
	}
	if len(names) == 0 {
		return cmdutil.Invalid("--served-chain: %s %q has no entry whose served chain kube-apiserver verifies", d.Kind, d.Name)
	}
	for _, flag := range s.flags {
		if entry, _ := splitServedChain(flag); entry != "" && !slices.Contains(names, entry) {
			return cmdutil.Invalid("--served-chain %s: %s %q has no entry %q (its entries: %s)",
				flag, d.Kind, d.Name, entry, strings.Join(names, ", "))
		}
	}
	return nil
}
