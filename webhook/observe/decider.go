package observe

import (
	"context"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// CAResolver resolves an owner's CA; casource.Resolver is the real one.
type CAResolver interface {
	Resolve(ctx context.Context, req casource.Request, live bool) casource.Result
}

// CADecider is the observer's Decider: admission's decision (the same
// policy code, the same CA resolver) without anything that waits.
//
// Admission re-reads the owner's CA before a ca-mismatch stands, waiting up
// to a second for its watches to deliver a CA written just before the
// request; the observer does not: a change it sees has happened already,
// and a writer storming distinct foreign CAs would hold it a second per CA,
// one event at a time, while the watch's notifications pile up in memory.
//
// A mapping's declared source (a Secret, a Certificate, an Issuer, ...) is
// resolved as admission resolves it: one source per mapping, so the first
// read of each is bounded by the configuration. The source of an
// injectedByCertManager mapping is named by the observed object itself (its
// inject annotation), so a writer can name a new one per write; the
// observer resolves it only from what the guard already holds (HeldOnly: a
// running watch, a cached read) and otherwise decides ca-unavailable at
// once. The sources that matter are held: admission resolves the stored
// object's annotation on every writer's request (static shape), and Warm
// resolves those of the configurations that existed when the observer
// started. An annotation pointing somewhere no request and no existing
// configuration pointed is itself worth a finding.
type CADecider struct {
	Config ConfigSource
	CA     CAResolver
	// Fingerprints memoizes caBundle parsing (admission's cache); nil
	// parses every bundle.
	Fingerprints *policy.FingerprintCache
}

// Decide implements Decider.
func (d *CADecider) Decide(ctx context.Context, in *policy.Input) policy.Decision {
	if in.Fingerprints == nil {
		in.Fingerprints = d.Fingerprints
	}
	cfg := d.Config.Current()
	m := cfg.MatchInput(in)
	if !cfg.NeedsOwnerCA(m, in) {
		return cfg.DecideMatched(m, in)
	}
	req := casource.Request{Owner: m.Owner, Annotations: in.Annotations, ClusterResourceNamespace: cfg.Spec.CertManager.ClusterResourceNamespace,
		HeldOnly: m.Owner.CA.InjectedByCertManager != nil}
	in.CA = d.CA.Resolve(ctx, req, false).CAResult
	return cfg.DecideMatched(m, in)
}

// Warm resolves the CA source the inject annotation of an existing
// configuration names, so that later changes of it find the source held.
// It may start a watch and wait for it: the observer calls it for the
// configurations of its initial list only, off the event path.
func (d *CADecider) Warm(ctx context.Context, kind policy.ConfigKind, name string, labels, annotations map[string]string) {
	cfg := d.Config.Current()
	m := cfg.Match(kind, name, labels)
	if m.Owner == nil || len(m.Conflicting) > 0 || m.Owner.CA.InjectedByCertManager == nil {
		return
	}
	d.CA.Resolve(ctx, casource.Request{Owner: m.Owner, Annotations: annotations, ClusterResourceNamespace: cfg.Spec.CertManager.ClusterResourceNamespace}, false)
}
