package scan

import (
	"context"
	"fmt"
	"strings"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/discover"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// target is one webhook configuration, either kind, or a CRD's conversion
// webhook or an APIService with its one entry.
type target struct {
	kind     policy.GuardedKind
	meta     metav1.ObjectMeta
	webhooks []targetWebhook
	// insecure is an APIService's insecureSkipTLSVerify.
	insecure bool
}

type targetWebhook struct {
	name   string
	client admv1.WebhookClientConfig
}

func (s target) ref() string { return string(s.kind) + "/" + s.meta.Name }

// scanMappings compares the configurations with the owner mappings.
func scanMappings(ctx context.Context, c client.Client, cfg *policy.Mappings, o Options) ([]Finding, error) {
	targets, unreadable, err := listTargets(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("list webhook configurations: %w", err)
	}
	s := &scanner{cfg: cfg, opts: o, resolver: casource.New(c, casource.Options{})}
	var out []Finding
	seen := map[string]bool{}
	for _, t := range targets {
		seen[t.ref()] = true
		out = append(out, s.scan(ctx, t)...)
	}
	for _, ow := range cfg.Spec.Owners {
		for _, named := range ow.Match.Named() {
			for _, n := range named.Names {
				ref := named.Kind + "/" + n
				switch why, skipped := unreadable[policy.GuardedKind(named.Kind)]; {
				case skipped:
					out = append(out, unknown(ow.Name, ref, why))
				case !seen[ref]:
					out = append(out, missing(ow.Name, ref))
				}
			}
		}
	}
	return out, nil
}

// listTargets reads the webhook configurations and the trust objects (CRDs
// with a conversion webhook, APIServices with a service); unreadable are
// the kinds of trust object that could not be listed, with why.
func listTargets(ctx context.Context, c client.Reader) ([]target, map[policy.GuardedKind]string, error) {
	var vs admv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &vs); err != nil {
		return nil, nil, err
	}
	var ms admv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &ms); err != nil {
		return nil, nil, err
	}
	trust, unreadable, err := discover.ListTrustObjects(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	var out []target
	for _, v := range vs.Items {
		out = append(out, targetOf(policy.KindValidating, v.ObjectMeta, v.Webhooks, func(w *admv1.ValidatingWebhook) targetWebhook {
			return targetWebhook{w.Name, w.ClientConfig}
		}))
	}
	for _, m := range ms.Items {
		out = append(out, targetOf(policy.KindMutating, m.ObjectMeta, m.Webhooks, func(w *admv1.MutatingWebhook) targetWebhook {
			return targetWebhook{w.Name, w.ClientConfig}
		}))
	}
	for _, o := range trust {
		info, _ := o.Kind.Info() // ListTrustObjects read it by its row
		out = append(out, target{kind: o.Kind, meta: o.Meta, webhooks: []targetWebhook{{info.Entries.Name, o.ClientConfig}}, insecure: o.InsecureSkipTLSVerify})
	}
	return out, unreadable, nil
}

// targetOf is one configuration of either kind: the two kinds' webhook
// types differ only in fields scan does not read, so one reads a webhook
// and the rest is shared.
func targetOf[W any](kind policy.GuardedKind, meta metav1.ObjectMeta, webhooks []W, one func(*W) targetWebhook) target {
	t := target{kind: kind, meta: meta}
	for i := range webhooks {
		t.webhooks = append(t.webhooks, one(&webhooks[i]))
	}
	return t
}

type scanner struct {
	cfg      *policy.Mappings
	opts     Options
	resolver *casource.Resolver
}

func (s *scanner) scan(ctx context.Context, t target) []Finding {
	m := s.cfg.Match(t.kind, t.meta.Name, t.meta.Labels)
	if len(m.Conflicting) > 0 {
		return []Finding{{Level: LevelFail, Check: CheckAmbiguousMapping, Mapping: strings.Join(m.Conflicting, ","), Configuration: t.ref(),
			Detail: "the label selectors of several mappings match it", Suggestion: "narrow all but one of the label selectors"}}
	}
	if m.Owner == nil {
		return []Finding{{Level: LevelInfo, Check: CheckUnmapped, Configuration: t.ref(), Detail: "no mapping covers this configuration",
			Suggestion: "add it to the match of the mapping of the controller that owns it (or keep it unguarded on purpose)"}}
	}
	var out []Finding
	ca := s.resolver.Resolve(ctx, casource.Request{Owner: m.Owner, Annotations: t.meta.Annotations, ClusterResourceNamespace: s.cfg.Spec.CertManager.ClusterResourceNamespace}, true)
	whole := s.findingOf(m.Owner.Name, t, -1, "")
	if ca.Err != nil {
		out = append(out, whole(LevelFail, CheckCAUnavailable, "", ca.Err.Error(), fmt.Sprintf("fix owners[%s].ca or the permissions to read it", m.Owner.Name)))
	} else {
		out = append(out, s.caExpiry(whole, "the owner's CA ("+ca.Source+")", ca.Set.NotAfter(), fmt.Sprintf("renew the owner's CA (owners[%s].ca)", m.Owner.Name))...)
	}
	for i, w := range t.webhooks {
		f := s.findingOf(m.Owner.Name, t, i, w.name)
		if t.insecure {
			out = append(out, f(LevelFail, CheckCAMismatch, "insecureSkipTLSVerify",
				"insecureSkipTLSVerify is set: kube-apiserver trusts any serving certificate for the APIService, whatever the caBundle holds",
				"unset spec.insecureSkipTLSVerify and let the owner (or cainjector) write the owner's CA into spec.caBundle"))
		}
		bundle := w.client.CABundle
		if len(bundle) == 0 {
			out = append(out, f(LevelWarn, CheckCAEmpty, "", "the caBundle is empty: kube-apiserver verifies the webhook with its own trust store",
				"let the owner (or cainjector) write the owner's CA"))
		} else if ca.Err == nil {
			out = append(out, caMismatch(f, bundle, ca.Set, m.Owner.Name)...)
		}
		out = append(out, dialServingCert(ctx, w.client, s.opts, f)...)
	}
	return out
}

// findingOf makes the findings of a mapped configuration; with index >= 0
// they are of its webhooks[index] entry, and a field names the entry's
// field (webhooks[i].clientConfig.caBundle, a CRD's
// spec.conversion.webhook.clientConfig.caBundle, an APIService's
// spec.caBundle) where the check has one.
func (s *scanner) findingOf(owner string, t target, index int, webhook string) findingFunc {
	return func(level Level, check, field, detail, fix string) Finding {
		f := Finding{Level: level, Check: check, Mapping: owner, Configuration: t.ref(), Webhook: webhook, Detail: detail, Suggestion: fix}
		if field != "" && index >= 0 {
			f.Field = policy.EntryField(t.kind, index, field)
		}
		return f
	}
}

// caMismatch finds certificates in the caBundle that are not the owner's.
func caMismatch(f findingFunc, bundle []byte, set cabundle.CASet, owner string) []Finding {
	fps, err := cabundle.Parse(bundle)
	if err != nil {
		return []Finding{f(LevelFail, CheckCAMismatch, "", "the caBundle "+err.Error(), "rewrite it with the owner's CA")}
	}
	var foreign []string
	for _, fp := range fps {
		if !set.Contains(fp) {
			foreign = append(foreign, fp.Short())
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	return []Finding{f(LevelFail, CheckCAMismatch, "",
		fmt.Sprintf("the caBundle holds CA %s, not in the owner's CA set %s", strings.Join(foreign, ","), strings.Join(set.Short(), ",")),
		"find who wrote it (managedFields, the guard's review) and make it use the owner's CA, or fix owners["+owner+"].ca")}
}

// caExpiry warns of the owner's CA expiring within the threshold and fails
// an expired one.
func (s *scanner) caExpiry(f findingFunc, what string, notAfter time.Time, fix string) []Finding {
	if notAfter.IsZero() {
		return nil
	}
	return expiry(f, CheckCAExpiry, "", what, notAfter, s.opts, fix)
}
