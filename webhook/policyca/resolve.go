// Package policyca resolves each owner mapping's CA for the policy shape's
// generated policies (policy/vap): one CA per mapping, resolved before any
// request, which the policies hold as a literal or read as their param. Its
// two callers differ only in where the CA comes from: `render policy` reads
// every source live from --objects, the policy syncer (webhook/policysync)
// asks its watching resolver for what it holds.
//
// It is a package of its own, not the syncer's, so that the command
// resolves the CAs exactly as the syncer does without importing the
// controller.
package policyca

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// CAResolver resolves an owner's CA; casource.Resolver is the real one.
type CAResolver interface {
	Resolve(ctx context.Context, req casource.Request, live bool) casource.Result
}

// Resolution is the outcome of resolving every mapping's CA.
type Resolution struct {
	// CAs are the generator's input, by mapping name.
	CAs map[string]vap.CA
	// Transient names the mappings whose source could not be asked (API
	// unreachable, timeouts): the guard keeps their policies as they are rather
	// than replacing a good CA with an error. Definitive failures (not
	// found, garbage) are written, so caBundle changes fail closed at once,
	// as the webhook's.
	Transient map[string]error
}

// Resolve resolves every mapping's CA. reader reads the mappings' named
// configurations, whose cert-manager annotations name the CA of
// injectedByCertManager mappings.
//
// With live true every source is read live: nothing comes from the
// resolver's cache (render policy, which reads files once). With live
// false the resolver answers from what it holds (the syncer's resolver
// reads watches, whose every change starts a pass, so what they hold is
// current).
func Resolve(ctx context.Context, cfg *policy.Mappings, r CAResolver, reader client.Reader, live bool) Resolution {
	res := Resolution{CAs: map[string]vap.CA{}, Transient: map[string]error{}}
	for i := range cfg.Spec.Owners {
		o := &cfg.Spec.Owners[i]
		var ca vap.CA
		var err error
		if o.CA.InjectedByCertManager != nil && !o.CA.InjectedByCertManager.Pinned() {
			ca, err = resolveInjected(ctx, cfg, o, r, reader, live)
		} else {
			// A pinned injectedByCertManager source names its CA like any
			// fixed source: the resolver reads the pin, never an
			// annotation, so it serves CRDs and APIServices too.
			out := r.Resolve(ctx, casource.Request{Owner: o, ClusterResourceNamespace: cfg.Spec.CertManager.ClusterResourceNamespace}, live)
			ca, err = fromResult(out)
		}
		if err != nil && !casource.IsDefinitive(err) {
			res.Transient[o.Name] = err
		}
		if ca.Param == nil && o.CA.Secret != nil {
			// A secret source names its Secret in the configuration: the
			// policy reads it even while the guard cannot (the Secret not
			// created yet, or without the key, as a rotator's Secret starts),
			// so the writer's first write is decided on what kube-apiserver
			// sees, not on the guard's last pass.
			ref := *o.CA.Secret
			ca.Param, ca.ParamMissing = &ref, casource.IsNotFound(err)
		}
		res.CAs[o.Name] = ca
	}
	return res
}

// DropParams makes every mapping's policy hold its CA as a literal only, for
// a writer that may not create policies with a Secret param (kube-apiserver
// requires get on every Secret of whoever does).
func (r Resolution) DropParams() {
	for name, ca := range r.CAs {
		ca.Param = nil
		r.CAs[name] = ca
	}
}

func fromResult(out casource.Result) (vap.CA, error) {
	if out.Err != nil {
		return vap.CAFromError(out.Err), out.Err
	}
	if out.Stale {
		err := &casource.SourceError{Source: out.Source, Reason: "the source cannot be read; serving a stale answer"}
		return vap.CAFromError(err), err
	}
	if len(out.Set.PEM()) == 0 {
		err := &casource.SourceError{Source: out.Source, Reason: "holds no CA bytes", Definitive: true}
		return vap.CAFromError(err), err
	}
	return vap.CAFromSet(out.Set), nil
}

// resolveInjected resolves the CA that the cert-manager annotations of an
// unpinned mapping's named configurations point at. Policy shape holds one
// CA per mapping: configurations injecting different CAs, or a selector-only
// mapping (whose configurations are not known in advance), cannot be
// expressed and fail closed with a message saying so.
func resolveInjected(ctx context.Context, cfg *policy.Mappings, o *guardapi.Owner, r CAResolver, reader client.Reader, live bool) (vap.CA, error) {
	type named struct {
		kind policy.GuardedKind
		name string
	}
	var configs []named
	for _, n := range o.Match.Validating {
		configs = append(configs, named{policy.KindValidating, n})
	}
	for _, n := range o.Match.Mutating {
		configs = append(configs, named{policy.KindMutating, n})
	}
	if len(configs) == 0 {
		err := &casource.SourceError{Source: "injectedByCertManager", Reason: "the policy shape resolves this CA from the annotations of the mapping's named webhook configurations (one CA per mapping, resolved before any request), and this mapping names none; name its configurations, or for CRDs and APIServices pin the CA with ca.injectedByCertManager.certificate (or .secret)", Definitive: true}
		return vap.CAFromError(err), err
	}
	var found *vap.CA
	var foundIn string
	// One answer per source: two configurations naming the same Certificate
	// are one CA even when it rotates between the two reads.
	seen := map[string]bool{}
	// The pointers the CA was resolved from: the policy allows an empty
	// entry only on an object pointing at one of them.
	var pointers []policy.Pointer
	for _, c := range configs {
		var obj client.Object = &admv1.ValidatingWebhookConfiguration{}
		if c.kind == policy.KindMutating {
			obj = &admv1.MutatingWebhookConfiguration{}
		}
		if err := reader.Get(ctx, types.NamespacedName{Name: c.name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			e := &casource.SourceError{Source: fmt.Sprintf("%s %s", c.kind, c.name), Reason: err.Error()}
			return vap.CAFromError(e), e
		}
		out := r.Resolve(ctx, casource.Request{Owner: o, Annotations: obj.GetAnnotations(), ClusterResourceNamespace: cfg.Spec.CertManager.ClusterResourceNamespace}, live)
		ca, err := fromResult(out)
		if err != nil {
			return ca, err
		}
		if p := policy.PointerOf(obj.GetAnnotations()); !slices.Contains(pointers, p) {
			pointers = append(pointers, p)
		}
		if seen[out.Source] {
			continue
		}
		seen[out.Source] = true
		if found != nil && !bytes.Equal(found.PEM, ca.PEM) {
			e := &casource.SourceError{Source: "injectedByCertManager", Reason: fmt.Sprintf("%s and %s %s inject different CAs; the policy shape holds one CA per mapping: split the mapping", foundIn, c.kind, c.name), Definitive: true}
			return vap.CAFromError(e), e
		}
		found, foundIn = &ca, fmt.Sprintf("%s %s", c.kind, c.name)
	}
	if found == nil {
		err := &casource.SourceError{Source: "injectedByCertManager", Reason: "none of the mapping's configurations exists yet, so no inject-ca-from annotation names the CA", Definitive: true}
		return vap.CAFromError(err), err
	}
	found.Pointers = pointers
	return *found, nil
}
