package scan

import (
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/discover"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook/servedchain"
)

// Health checks: the failure modes behind most webhook outages (and
// CheckServingCert, shared with the mappings' checks).
const (
	CheckNoEndpoints   = "no-ready-endpoints"
	CheckFailScope     = "fail-catches-system-namespaces"
	CheckTimeout       = "timeout"
	CheckSideEffects   = "side-effects"
	CheckCAWriters     = "multiple-ca-writers"
	maxTimeoutSeconds  = 10
	systemNamespace    = "kube-system"
	nodeLeaseNamespace = "kube-node-lease"
)

// Health checks every configuration's webhooks; findings are sorted.
func Health(configs []discover.Configuration, c discover.Cluster, o Options) []Finding {
	var out []Finding
	for _, cfg := range configs {
		for i, w := range cfg.Webhooks {
			f := func(level Level, check, field, detail, fix string) Finding {
				return Finding{Level: level, Check: check, Configuration: cfg.Ref(), Webhook: w.Name, Field: policy.EntryField(cfg.Kind, i, field), Detail: detail, Suggestion: fix}
			}
			out = append(out, endpoints(cfg, w, c, f)...)
			out = append(out, mountedServingCert(w, c, o, f)...)
			if !cfg.Kind.OwnsTrustOnly() {
				// A conversion webhook and an APIService have no
				// failurePolicy, rules, timeout or side effects to tune.
				out = append(out, admissionHealth(i, w, c, f)...)
			}
		}
		if len(cfg.CABundleManagers) > 1 {
			out = append(out, Finding{Level: LevelWarn, Check: CheckCAWriters, Configuration: cfg.Ref(), Field: policy.EntryField(cfg.Kind, -1, "clientConfig.caBundle"),
				Detail:     fmt.Sprintf("%d field managers own caBundle fields: %s", len(cfg.CABundleManagers), strings.Join(cfg.CABundleManagers, ", ")),
				Suggestion: "keep one CA writer: every other manager is a second CA writer fighting the owner (map the owner and run the guard to see who writes)"})
		}
	}
	slices.SortFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(a.Configuration, b.Configuration), cmp.Compare(a.Field, b.Field), cmp.Compare(a.Check, b.Check))
	})
	return out
}

// admissionHealth checks what only an admission webhook has: the failure
// scope of its rules, its timeout and its side effects.
func admissionHealth(i int, w discover.Webhook, c discover.Cluster, f findingFunc) []Finding {
	out := failScope(w, c, f)
	if w.TimeoutSeconds != nil && *w.TimeoutSeconds > maxTimeoutSeconds {
		out = append(out, f(LevelWarn, CheckTimeout, "timeoutSeconds",
			fmt.Sprintf("timeoutSeconds is %d: every request the webhook matches waits up to %ds while it hangs", *w.TimeoutSeconds, *w.TimeoutSeconds),
			fmt.Sprintf("set webhooks[%d].timeoutSeconds to %d or less", i, maxTimeoutSeconds)))
	}
	if w.SideEffects != nil && (*w.SideEffects == admv1.SideEffectClassUnknown || *w.SideEffects == admv1.SideEffectClassSome) {
		out = append(out, f(LevelWarn, CheckSideEffects, "sideEffects",
			fmt.Sprintf("sideEffects is %s: kube-apiserver rejects every dry-run request (kubectl --dry-run=server, diff) this webhook matches", *w.SideEffects),
			fmt.Sprintf("set webhooks[%d].sideEffects to None, or NoneOnDryRun if the webhook skips its side effects on dry-run requests", i)))
	}
	return out
}

// failPolicy is the webhook's failure policy, defaulted as the API does.
func failPolicy(w discover.Webhook) admv1.FailurePolicyType {
	if w.FailurePolicy == nil {
		return admv1.Fail
	}
	return *w.FailurePolicy
}

// endpoints: with failurePolicy Fail, a Service with no ready endpoint
// fails every request the webhook matches. A CRD's conversion webhook and
// an APIService have no failurePolicy and fail alike (discover reads them
// as Fail), each with its own reach.
func endpoints(cfg discover.Configuration, w discover.Webhook, c discover.Cluster, f findingFunc) []Finding {
	if w.Service == nil || failPolicy(w) != admv1.Fail {
		return nil
	}
	state := "has no ready endpoints"
	if svc, ok := c.Services[w.Service.String()]; !ok {
		state = "does not exist"
	} else if svc.ReadyEndpoints > 0 {
		return nil
	}
	detail, fix := unreachable(cfg, w.Service, state)
	return []Finding{f(LevelFail, CheckNoEndpoints, "clientConfig.service", detail, fix)}
}

// unreachable words what fails when the Service an entry of cfg calls is
// in state (does not exist, has no ready endpoints), and the fix: each
// kind fails its own way. Any other kind gets a sentence that names it,
// which Test_endpoints_everyKind fails for a kind of guardapi.Kinds.
func unreachable(cfg discover.Configuration, svc *discover.ServiceRef, state string) (detail, fix string) {
	switch cfg.Kind {
	case policy.KindAPIService:
		return fmt.Sprintf("Service %s %s: the APIService is unavailable, and with it the whole API group %s fails: discovery and every request of it", svc, state, cfg.Group),
			fmt.Sprintf("run the server's pods behind Service %s, or delete the APIService while nothing serves it", svc)
	case policy.KindCRD:
		return fmt.Sprintf("Service %s %s: kube-apiserver cannot convert %s between versions: every read or write in a version other than the stored one fails", svc, state, cfg.Name),
			fmt.Sprintf("run the conversion webhook's pods behind Service %s", svc)
	case policy.KindValidating, policy.KindMutating:
		return fmt.Sprintf("Service %s %s and failurePolicy is Fail: every request the webhook matches fails", svc, state),
			fmt.Sprintf("run the webhook's pods behind Service %s, or set failurePolicy: Ignore until they are ready", svc)
	case policy.KindAdmissionPolicy, policy.KindAdmissionPolicyBinding:
		// Policy shape's generated objects call no Service: discover reads none.
	}
	return fmt.Sprintf("Service %s %s: kube-apiserver cannot call what %s %s trusts", svc, state, cfg.Kind, cfg.Name),
		fmt.Sprintf("run the pods behind Service %s", svc)
}

// mountedServingCert checks the serving certificates the workload behind
// the Service mounts (read from its Secrets, so it works from outside the
// cluster): each must verify for the Service's DNS name against the
// caBundle (the system roots when it is empty, as kube-apiserver then
// trusts them) and not expire within the threshold.
func mountedServingCert(w discover.Webhook, c discover.Cluster, o Options, f findingFunc) []Finding {
	if w.Service == nil {
		return nil
	}
	svc, ok := c.Services[w.Service.String()]
	if !ok {
		return nil
	}
	mounted := map[string]bool{}
	for _, wl := range c.Workloads {
		if wl.Namespace == svc.Namespace && svc.Selects(wl.TemplateLabels) {
			for _, s := range wl.Secrets {
				mounted[wl.Namespace+"/"+s] = true
			}
		}
	}
	name := servedchain.Service{Namespace: w.Service.Namespace, Name: w.Service.Name}.DNSName()
	var out []Finding
	for _, s := range c.Sources {
		if s.Kind != discover.SourceSecret || !mounted[s.Namespace+"/"+s.Name] {
			continue
		}
		chain := parseCerts(s.PEM)
		if len(chain) == 0 || chain[0].IsCA || chain[0].VerifyHostname(name) != nil {
			continue // not a serving certificate for this Service
		}
		sc := servingCert{chain: servedchain.NewChain(chain), where: fmt.Sprintf("in %s key %s", s.Ref(), s.Key), renew: "renew the serving certificate in " + s.Ref()}
		out = append(out, checkServingCert(sc, w.CABundle, name, o, f)...)
	}
	return out
}

func parseCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			return out
		}
		data = rest
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// failScope: failurePolicy Fail on rules that catch kube-system,
// kube-node-lease or the webhook's own namespace turns a webhook outage into
// a cluster outage (node leases stop renewing, the webhook's own pods
// cannot be recreated).
func failScope(w discover.Webhook, c discover.Cluster, f findingFunc) []Finding {
	if failPolicy(w) != admv1.Fail || !catchesNamespaced(w.Rules) {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
	if err != nil {
		return nil // kube-apiserver validates selectors; an invalid one never gets here
	}
	if w.NamespaceSelector == nil {
		sel = labels.Everything()
	}
	namespaces := []string{systemNamespace, nodeLeaseNamespace}
	if w.Service != nil && !slices.Contains(namespaces, w.Service.Namespace) {
		namespaces = append(namespaces, w.Service.Namespace)
	}
	var caught []string
	for _, ns := range namespaces {
		l := c.Namespaces[ns]
		if l == nil {
			// Every namespace carries its name as this label.
			l = map[string]string{"kubernetes.io/metadata.name": ns}
		}
		if sel.Matches(labels.Set(l)) {
			caught = append(caught, ns)
		}
	}
	if len(caught) == 0 {
		return nil
	}
	detail := fmt.Sprintf("failurePolicy is Fail and the namespaceSelector does not exclude %s: while the webhook is down, writes there fail", strings.Join(caught, ", "))
	if w.MatchConditions > 0 {
		detail += " (unless its matchConditions exclude them)"
	}
	return []Finding{f(LevelWarn, CheckFailScope, "namespaceSelector", detail,
		fmt.Sprintf("add {key: kubernetes.io/metadata.name, operator: NotIn, values: [%s]} to the namespaceSelector's matchExpressions, or set failurePolicy: Ignore", strings.Join(caught, ", ")))}
}

// catchesNamespaced says whether any rule can match a namespaced resource.
func catchesNamespaced(rules []admv1.RuleWithOperations) bool {
	for _, r := range rules {
		if r.Scope == nil || *r.Scope != admv1.ClusterScope {
			return true
		}
	}
	return false
}
