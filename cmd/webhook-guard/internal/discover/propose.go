package discover

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Proposal is the inferred GuardConfig content: one mapping per owning
// controller, and the configurations that could not be mapped.
type Proposal struct {
	// Mappings are sorted by name; their mode is left to defaultMode.
	Mappings []Mapping
	// Undecided are sorted by configuration.
	Undecided []Undecided
}

// Mapping is a proposed owner mapping and the evidence behind it.
type Mapping struct {
	Owner guardapi.Owner
	// Evidence is one line per fact the mapping rests on.
	Evidence []string
}

// Undecided is a configuration no mapping is proposed for, and why.
type Undecided struct {
	Configuration string
	// Reasons say what could not be decided, plainly.
	Reasons []string
	// Evidence is what was found nonetheless.
	Evidence []string
}

// inference is what one configuration's evidence settles.
type inference struct {
	cfg Configuration
	// writer is the service account ("namespace/name") of the workload
	// behind the webhooks; empty when none was found.
	writer string
	// owner names the mapping: the workload (or the service account when
	// several workloads share it).
	owner    string
	ca       guardapi.CASource
	evidence []string
	reasons  []string
}

// Propose infers owner mappings from the evidence. Configurations with the
// same writer and the same CA source share one mapping.
func Propose(configs []Configuration, c Cluster) Proposal {
	var p Proposal
	type group struct {
		inf  []inference
		name string
	}
	groups := map[string]*group{}
	var order []string
	for _, cfg := range configs {
		inf := infer(cfg, c)
		if len(inf.reasons) > 0 {
			p.Undecided = append(p.Undecided, Undecided{Configuration: cfg.Ref(), Reasons: inf.reasons, Evidence: inf.evidence})
			continue
		}
		key := inf.writer + "|" + caKey(inf.ca)
		g, ok := groups[key]
		if !ok {
			g = &group{name: inf.owner}
			groups[key] = g
			order = append(order, key)
		}
		g.inf = append(g.inf, inf)
	}
	// Stable names: groups are ordered by their name and key, and a name
	// taken by an earlier group gets its CA's configuration name appended.
	slices.SortFunc(order, func(a, b string) int {
		return cmp.Or(cmp.Compare(groups[a].name, groups[b].name), cmp.Compare(a, b))
	})
	taken := map[string]bool{}
	for _, key := range order {
		g := groups[key]
		name := g.name
		for i := 2; taken[name]; i++ {
			name = fmt.Sprintf("%s-%d", g.name, i)
		}
		taken[name] = true
		p.Mappings = append(p.Mappings, buildMapping(name, g.inf, c))
	}
	slices.SortFunc(p.Mappings, func(a, b Mapping) int { return cmp.Compare(a.Owner.Name, b.Owner.Name) })
	slices.SortFunc(p.Undecided, func(a, b Undecided) int { return cmp.Compare(a.Configuration, b.Configuration) })
	return p
}

func buildMapping(name string, infs []inference, c Cluster) Mapping {
	m := Mapping{Owner: guardapi.Owner{Name: name, CA: infs[0].ca}}
	if w := infs[0].writer; w != "" {
		m.Owner.Writers.ServiceAccounts = []string{w}
	}
	for _, inf := range infs {
		names := m.Owner.Match.NamesOf(string(inf.cfg.Kind))
		if names == nil {
			m.Evidence = append(m.Evidence, inf.cfg.Ref()+": no match field names a "+string(inf.cfg.Kind)+"; left out of the mapping")
			continue
		}
		*names = append(*names, inf.cfg.Name)
		for _, e := range inf.evidence {
			m.Evidence = append(m.Evidence, inf.cfg.Ref()+": "+e)
		}
	}
	for _, k := range guardapi.Kinds {
		if names := m.Owner.Match.NamesOf(k.Kind); names != nil {
			slices.Sort(*names)
		}
	}
	if m.Owner.CA.InjectedByCertManager != nil {
		m.Evidence = append(m.Evidence, "cainjector ("+c.CAInjector+") becomes a writer of this mapping through certManager.caInjectorServiceAccount")
		if infs[0].writer == "" {
			m.Evidence = append(m.Evidence, "no workload was found behind the webhooks: only cainjector may write; add whoever applies these configurations (Helm's or Argo CD's identity) to writers")
		}
	}
	return m
}

// caKey identifies a CA source for grouping: its JSON, which names the
// kind and every field of it, so that no kind has to be listed here (and a
// new one groups correctly). Every injected configuration reads its own
// annotation, so they all share one key.
func caKey(s guardapi.CASource) string {
	b, err := json.Marshal(s)
	if err != nil {
		// CASource is plain strings and pointers to structs of strings.
		panic(fmt.Sprintf("marshal a CA source: %v", err))
	}
	return string(b)
}

// CAInjectorFieldManager is the field manager cert-manager's cainjector
// writes caBundles under (its client's user agent name).
const CAInjectorFieldManager = "cert-manager-cainjector"

func infer(cfg Configuration, c Cluster) inference {
	inf := inference{cfg: cfg}
	workloads := inf.findWorkloads(c)
	injected := inf.injectedCA(c)
	if !injected {
		inf.matchCA(c, workloads)
	}
	if len(cfg.CABundleManagers) > 0 {
		line := "caBundle field managers: " + strings.Join(cfg.CABundleManagers, ", ")
		if len(cfg.CABundleManagers) > 1 {
			line += fmt.Sprintf(" (%d writers of caBundle: the guard records every write by a subject that is not this mapping's writer)", len(cfg.CABundleManagers))
		}
		inf.evidence = append(inf.evidence, line)
		if slices.Contains(cfg.CABundleManagers, CAInjectorFieldManager) {
			inf.evidence = append(inf.evidence, CAInjectorFieldManager+" merges (cert-manager >= v1.21, feature gate CAInjectorMerging, on by default): "+
				"a rotation appends the new CA and keeps the old ones until they expire; the guard allows it, as a rotation may keep what the entry already holds")
		}
	}
	if inf.writer == "" && !injected && len(inf.reasons) == 0 {
		inf.reasons = append(inf.reasons, "no writer found: a mapping needs the service account of the controller that writes the caBundle")
	}
	if injected && len(inf.reasons) > 0 && inf.writer == "" {
		// cainjector is the caBundle's writer: a missing workload is not a
		// reason to leave an injected configuration unmapped.
		inf.evidence = append(inf.evidence, inf.reasons...)
		inf.reasons = nil
	}
	if inf.owner == "" {
		inf.owner = mappingName(cfg.Name)
	}
	return inf
}

// findWorkloads follows every webhook's Service to the workloads it
// selects and settles the writer when they all run as one service account.
func (inf *inference) findWorkloads(c Cluster) []Workload {
	var found []Workload
	seen := map[string]bool{}
	for i, w := range inf.cfg.Webhooks {
		switch {
		case w.Service == nil && w.URL != "":
			inf.evidence = append(inf.evidence, fmt.Sprintf("%s calls clientConfig.url %s", entryLabel(inf.cfg.Kind, i), w.URL))
			inf.reasons = append(inf.reasons, fmt.Sprintf("%s calls clientConfig.url %s, not a Service: no workload, so no service account to name as the writer", entryLabel(inf.cfg.Kind, i), w.URL))
			continue
		case w.Service == nil:
			continue
		}
		ref := w.Service.String()
		if seen[ref] {
			continue
		}
		seen[ref] = true
		svc, ok := c.Services[ref]
		if !ok {
			inf.reasons = append(inf.reasons, fmt.Sprintf("%s calls Service %s, which does not exist", entryLabel(inf.cfg.Kind, i), ref))
			continue
		}
		var selected []string
		for _, wl := range c.Workloads {
			if wl.Namespace == svc.Namespace && svc.Selects(wl.TemplateLabels) {
				found = append(found, wl)
				selected = append(selected, wl.Ref()+" (service account "+wl.ServiceAccount+")")
			}
		}
		if len(selected) == 0 {
			inf.reasons = append(inf.reasons, fmt.Sprintf("Service %s selects no Deployment, StatefulSet or DaemonSet", ref))
			continue
		}
		inf.evidence = append(inf.evidence, fmt.Sprintf("%s calls Service %s, which selects %s", entryLabel(inf.cfg.Kind, i), ref, strings.Join(selected, ", ")))
	}
	inf.settleWriter(found)
	return found
}

// settleWriter names the writer and the owner when the found workloads all
// run as one service account, and says why not when they do not.
func (inf *inference) settleWriter(found []Workload) {
	sas := map[string]bool{}
	for _, wl := range found {
		sas[wl.Namespace+"/"+wl.ServiceAccount] = true
	}
	switch {
	case len(sas) == 1:
		for sa := range sas {
			inf.writer = sa
		}
		inf.owner = mappingName(found[0].Name)
		if len(found) > 1 && !allSame(found, func(w Workload) string { return w.Name }) {
			inf.owner = mappingName(found[0].ServiceAccount)
		}
	case len(sas) > 1:
		inf.reasons = append(inf.reasons, "the webhooks' Services select workloads running as different service accounts: "+strings.Join(sortedKeys(sas), ", "))
	}
}

// injectedCA settles the CA source from cainjector's annotations.
func (inf *inference) injectedCA(c Cluster) bool {
	for _, a := range []string{cmapi.WantInjectAnnotation, cmapi.WantInjectFromSecretAnnotation} {
		if v, ok := inf.cfg.Annotations[a]; ok {
			inf.ca = guardapi.CASource{InjectedByCertManager: pinOf(a, v)}
			inf.evidence = append(inf.evidence, fmt.Sprintf("annotation %s: %s: cainjector (%s) writes the caBundle", a, v, c.CAInjector))
			return true
		}
	}
	return false
}

// pinOf pins the CA to what the annotation names, so that the proposed
// mapping denies any later re-pointing; an annotation that names nothing
// readable ("ns/name") is proposed unpinned.
func pinOf(annotation, value string) *guardapi.InjectedByCertManager {
	ns, name, ok := strings.Cut(value, "/")
	if !ok || ns == "" || name == "" {
		return &guardapi.InjectedByCertManager{}
	}
	ref := &guardapi.ObjectRef{Namespace: ns, Name: name}
	if annotation == cmapi.WantInjectFromSecretAnnotation {
		return &guardapi.InjectedByCertManager{Secret: ref}
	}
	return &guardapi.InjectedByCertManager{Certificate: ref}
}

// matchCA finds the Secret or ConfigMap key whose certificates include
// every certificate of the caBundles (what the guard's ca-mismatch rule
// would accept): one the workloads mount, else the only one in the
// webhooks' namespace; never one from another namespace.
func (inf *inference) matchCA(c Cluster, workloads []Workload) {
	bundle, ok := inf.bundle()
	if !ok {
		return
	}
	short := shortList(bundle)
	// Where a candidate lives decides how much it proves. discover reads
	// every namespace holding a cert-manager Certificate, and a CA
	// certificate is public: anyone may keep a copy of the owner's in a
	// namespace of their own. Only a candidate in the webhooks' own
	// namespace (where their Services and workloads are) may become the
	// source; a copy elsewhere is evidence, never the owner's source, or
	// it would tie the owner's CA to whoever controls that copy.
	own := inf.serviceNamespaces()
	inMounted, inOwn, elsewhere := placeCandidates(candidates(c.Sources, bundle), mountedSources(workloads), own)
	var chosen Source
	switch {
	case len(inMounted) == 1:
		chosen = inMounted[0]
		inf.evidence = append(inf.evidence, fmt.Sprintf("%s key %s holds the caBundle's CA %s and is mounted by the workload", chosen.Ref(), chosen.Key, short))
	case len(inMounted) > 1:
		inf.reasons = append(inf.reasons, fmt.Sprintf("the workload mounts %d candidate CA sources holding the caBundle's CA %s: %s", len(inMounted), short, refs(inMounted)))
		return
	case len(inOwn) == 1:
		chosen = inOwn[0]
		inf.evidence = append(inf.evidence, fmt.Sprintf("%s key %s holds the caBundle's CA %s, in the webhooks' namespace (not mounted by the workload)", chosen.Ref(), chosen.Key, short))
	case len(inOwn) > 1:
		inf.reasons = append(inf.reasons, fmt.Sprintf("%d candidate CA sources in the webhooks' namespace hold the caBundle's CA %s and none is mounted by the workload: %s", len(inOwn), short, refs(inOwn)))
		return
	case len(elsewhere) > 0:
		where := "no webhook calls a Service"
		if len(own) > 0 {
			where = "the webhooks' namespace is " + strings.Join(sortedKeys(own), ", ")
		}
		inf.reasons = append(inf.reasons, fmt.Sprintf("the caBundle's CA %s is held only outside the webhooks' namespace (%s), by %s: a copy elsewhere is not the owner's source; name the source in the mapping by hand",
			short, where, refs(elsewhere)))
		return
	default:
		inf.reasons = append(inf.reasons, fmt.Sprintf("the caBundle's CA %s matches no Secret or ConfigMap discover can read", short))
		return
	}
	if len(elsewhere) > 0 {
		inf.evidence = append(inf.evidence, fmt.Sprintf("copies of the caBundle's CA %s outside the webhooks' namespace, not taken as the source: %s", short, refs(elsewhere)))
	}
	inf.useSource(chosen)
}

// bundle is every certificate of the webhooks' caBundles; false, with the
// reason, when one does not parse or all are empty.
func (inf *inference) bundle() ([]cabundle.Fingerprint, bool) {
	var bundle []cabundle.Fingerprint
	for i, w := range inf.cfg.Webhooks {
		if len(w.CABundle) == 0 {
			continue
		}
		fps, err := cabundle.Parse(w.CABundle)
		if err != nil {
			inf.reasons = append(inf.reasons, fmt.Sprintf("%s %v", policy.EntryField(inf.cfg.Kind, i, "clientConfig.caBundle"), err))
			return nil, false
		}
		bundle = append(bundle, fps...)
	}
	if len(bundle) == 0 {
		inf.reasons = append(inf.reasons, "every caBundle is empty and no cert-manager.io/inject-ca-from annotation names a CA: there is no CA to match")
		return nil, false
	}
	return bundle, true
}

// useSource makes the chosen source the mapping's CA: its cert-manager
// Certificate when it is one's Secret, else the key itself.
func (inf *inference) useSource(chosen Source) {
	switch {
	case chosen.Certificate != "":
		inf.ca = guardapi.CASource{Certificate: &guardapi.ObjectRef{Namespace: chosen.Namespace, Name: chosen.Certificate}}
		inf.evidence = append(inf.evidence, fmt.Sprintf("%s is the Secret of cert-manager Certificate %s/%s", chosen.Ref(), chosen.Namespace, chosen.Certificate))
	case chosen.Kind == SourceConfigMap:
		inf.ca = guardapi.CASource{ConfigMap: &guardapi.KeyRef{Namespace: chosen.Namespace, Name: chosen.Name, Key: chosen.Key}}
	default:
		inf.ca = guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: chosen.Namespace, Name: chosen.Name, Key: chosen.Key}}
	}
}

// serviceNamespaces are the namespaces of the webhooks' Services: where the
// workloads behind them, and so the owner's own CA source, live.
func (inf *inference) serviceNamespaces() map[string]bool {
	out := map[string]bool{}
	for _, w := range inf.cfg.Webhooks {
		if w.Service != nil {
			out[w.Service.Namespace] = true
		}
	}
	return out
}

// mappingName makes a DNS-1123 subdomain of a workload or configuration
// name (they already are one; this guards hand-made objects).
func mappingName(s string) string {
	s = strings.ToLower(s)
	if len(validation.IsDNS1123Subdomain(s)) == 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-.")
	if out == "" {
		return "owner"
	}
	return out
}

func shortList(fps []cabundle.Fingerprint) string {
	var out []string
	for _, fp := range fps {
		if s := fp.Short(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}

func refs(ss []Source) string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Ref()+" key "+s.Key)
	}
	return strings.Join(out, ", ")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func containsAll(set cabundle.CASet, fps []cabundle.Fingerprint) bool {
	for _, fp := range fps {
		if !set.Contains(fp) {
			return false
		}
	}
	return true
}

func allSame[T any](xs []T, key func(T) string) bool {
	for _, x := range xs[1:] {
		if key(x) != key(xs[0]) {
			return false
		}
	}
	return true
}
