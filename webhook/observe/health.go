package observe

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// maxFingerprintLabel bounds the fingerprints named in the ca_fingerprint
// label: a bundle may hold cabundle.MaxCertificates of them.
const maxFingerprintLabel = 3

// fingerprintInvalid is the ca_fingerprint of a bundle with no certificate
// kube-apiserver can use.
const fingerprintInvalid = "invalid"

// kubernetes' defaults for an entry that leaves them unset (the API server
// fills them in; a fake client may not).
const (
	defaultFailurePolicy  = admv1.Fail
	defaultTimeoutSeconds = 10
)

// health computes the webhook health series from the watch's stores at
// each scrape. Parsed bundles are kept from one scrape to the next, so a
// scrape parses only the bundles written since the last.
type health struct {
	config ConfigSource
	stores []toolscache.Store
	// endpoints counts a Service's ready endpoints; false when unknown.
	endpoints func(namespace, name string) (int, bool)

	mu     sync.Mutex
	parsed map[[sha256.Size]byte]bundleHealth
}

// bundleHealth is what the series say of one caBundle.
type bundleHealth struct {
	fingerprint string
	notAfter    time.Time
}

// healthSource is the source of the webhook health series: every entry
// the stores hold, sorted, with the count of ready endpoints of the Service
// it calls (from endpoints).
func healthSource(config ConfigSource, endpoints func(namespace, name string) (int, bool), stores ...toolscache.Store) func() []metrics.WebhookEntry {
	h := &health{config: config, stores: stores, endpoints: endpoints, parsed: map[[sha256.Size]byte]bundleHealth{}}
	return h.entries
}

func (h *health) entries() []metrics.WebhookEntry {
	cfg := h.config.Current()
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[[sha256.Size]byte]bundleHealth, len(h.parsed))
	var out []metrics.WebhookEntry
	for _, s := range h.stores {
		for _, obj := range s.List() {
			out = h.appendEntries(out, cfg, seen, obj)
		}
	}
	h.parsed = seen
	return boundEntries(out, maxHealthEntries)
}

// maxHealthEntries bounds the entries the health series describe: they
// name every webhook, CRD conversion webhook and APIService in the
// cluster, which whoever may create those objects chooses, not the
// configuration. 1024 entries are three series each at most; a cluster
// has a few dozen.
const maxHealthEntries = 1024

// boundEntries sorts out by kind, configuration and entry and keeps at
// most limit of them: the entries a mapping guards first, then the others
// in order.
func boundEntries(out []metrics.WebhookEntry, limit int) []metrics.WebhookEntry {
	byName := func(a, b metrics.WebhookEntry) int {
		return strings.Compare(a.Kind+"/"+a.Configuration+"/"+a.Webhook, b.Kind+"/"+b.Configuration+"/"+b.Webhook)
	}
	if len(out) > limit {
		slices.SortStableFunc(out, func(a, b metrics.WebhookEntry) int {
			if guarded := a.Mapping != ""; guarded != (b.Mapping != "") {
				if guarded {
					return -1
				}
				return 1
			}
			return byName(a, b)
		})
		out = out[:limit]
	}
	slices.SortFunc(out, byName)
	return out
}

// entryFields are the fields of an entry the series read, with the
// defaults of its kind filled in.
type entryFields struct {
	name          string
	failurePolicy string
	timeout       string
	caBundle      []byte
	service       *admv1.ServiceReference
}

// admissionEntry reads one webhook entry of a Validating- or
// MutatingWebhookConfiguration.
func admissionEntry(name string, failurePolicy *admv1.FailurePolicyType, timeout *int32, cc *admv1.WebhookClientConfig) entryFields {
	f := entryFields{name: name, failurePolicy: string(defaultFailurePolicy), timeout: strconv.Itoa(defaultTimeoutSeconds),
		caBundle: cc.CABundle, service: cc.Service}
	if failurePolicy != nil {
		f.failurePolicy = string(*failurePolicy)
	}
	if timeout != nil {
		f.timeout = strconv.Itoa(int(*timeout))
	}
	return f
}

func (h *health) appendEntries(out []metrics.WebhookEntry, cfg *policy.Mappings, seen map[[sha256.Size]byte]bundleHealth, obj any) []metrics.WebhookEntry {
	var kind policy.GuardedKind
	var meta *metav1.ObjectMeta
	var fields []entryFields
	switch o := obj.(type) {
	case *admv1.ValidatingWebhookConfiguration:
		kind, meta = policy.KindValidating, &o.ObjectMeta
		for i := range o.Webhooks {
			w := &o.Webhooks[i]
			fields = append(fields, admissionEntry(w.Name, w.FailurePolicy, w.TimeoutSeconds, &w.ClientConfig))
		}
	case *admv1.MutatingWebhookConfiguration:
		kind, meta = policy.KindMutating, &o.ObjectMeta
		for i := range o.Webhooks {
			w := &o.Webhooks[i]
			fields = append(fields, admissionEntry(w.Name, w.FailurePolicy, w.TimeoutSeconds, &w.ClientConfig))
		}
	case *trustObject:
		kind, meta, fields = o.TrustKind, &o.ObjectMeta, o.entries()
	default:
		return out
	}
	if len(fields) == 0 {
		return out
	}
	mapping := mappingOf(cfg, kind, meta)
	for _, f := range fields {
		b := h.bundle(seen, f.caBundle)
		e := metrics.WebhookEntry{
			Kind: string(kind), Configuration: meta.Name, Webhook: f.name,
			FailurePolicy: f.failurePolicy, TimeoutSeconds: f.timeout,
			Mapping: mapping, CAFingerprint: b.fingerprint, CAExpiry: b.notAfter,
		}
		if f.service != nil {
			e.ServiceNamespace, e.ServiceName = f.service.Namespace, f.service.Name
			e.ReadyEndpoints, e.EndpointsKnown = h.endpoints(f.service.Namespace, f.service.Name)
		}
		out = append(out, e)
	}
	return out
}

// mappingOf names the mapping that owns the configuration, as decisions
// do: "" when none, the names joined with "," when several claim it.
func mappingOf(cfg *policy.Mappings, kind policy.GuardedKind, meta *metav1.ObjectMeta) string {
	m := cfg.Match(kind, meta.Name, meta.Labels)
	switch {
	case len(m.Conflicting) > 0:
		return strings.Join(m.Conflicting, ",")
	case m.Owner != nil:
		return m.Owner.Name
	}
	return ""
}

// bundle parses data, or takes the last scrape's parse of it, and notes it
// in seen.
func (h *health) bundle(seen map[[sha256.Size]byte]bundleHealth, data []byte) bundleHealth {
	if len(bytes.TrimSpace(data)) == 0 {
		return bundleHealth{}
	}
	sum := sha256.Sum256(data)
	b, ok := seen[sum]
	if !ok {
		b, ok = h.parsed[sum]
	}
	if !ok {
		b = parseBundleHealth(data)
	}
	seen[sum] = b
	return b
}

func parseBundleHealth(data []byte) bundleHealth {
	set, err := cabundle.NewCASet("", data)
	if err != nil {
		return bundleHealth{fingerprint: fingerprintInvalid}
	}
	fps := set.Short()
	label := strings.Join(fps[:min(len(fps), maxFingerprintLabel)], ",")
	if extra := len(fps) - maxFingerprintLabel; extra > 0 {
		label += ",+" + strconv.Itoa(extra)
	}
	return bundleHealth{fingerprint: label, notAfter: set.NotAfter()}
}

// exportHealth makes the health series describe what the informers of
// webhook configurations hold, and the stores of CRDs and APIServices
// (trust), with the ready endpoints of the Services they call; the
// returned func stops it (a follower, or a stopped leader, exports none).
func (o *Observer) exportHealth(infs []toolscache.SharedIndexInformer, endpoints readyEndpoints, trust []toolscache.Store) func() {
	stores := make([]toolscache.Store, len(infs), len(infs)+len(trust))
	for i, inf := range infs {
		stores[i] = inf.GetStore()
	}
	stores = append(stores, trust...)
	o.Metrics.Health.SetSource(healthSource(o.Config, endpoints.count, stores...))
	return func() { o.Metrics.Health.SetSource(nil) }
}
