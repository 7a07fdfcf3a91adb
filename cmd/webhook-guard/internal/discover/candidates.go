package discover

import (
	"cmp"
	"slices"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Where a mapping's CA may come from: the Secrets and ConfigMaps that hold
// every certificate of the caBundle, one key per object, sorted by how
// close they are to the webhooks' workloads.

// mountedSources are the Secrets and ConfigMaps the workloads mount, by
// Source.Ref.
func mountedSources(workloads []Workload) map[string]bool {
	mounted := map[string]bool{}
	for _, wl := range workloads {
		for _, s := range wl.Secrets {
			mounted[string(SourceSecret)+" "+wl.Namespace+"/"+s] = true
		}
		for _, s := range wl.ConfigMaps {
			mounted[string(SourceConfigMap)+" "+wl.Namespace+"/"+s] = true
		}
	}
	return mounted
}

// candidates are the sources holding every certificate of bundle, one per
// object (by Source.Ref): of an object's matching keys, the one holding the
// fewest certificates the bundle lacks (a root-only key over a chain that
// also holds an intermediate, as Istio's cacerts holds root-cert.pem and
// cert-chain.pem: the writer copies the root-only key), then ca.crt, then
// the first by name.
func candidates(sources []Source, bundle []cabundle.Fingerprint) map[string]Source {
	byObject := map[string]Source{}
	extraOf := map[string]int{}
	want := cabundle.NewCASetFromFingerprints("", bundle...).Len()
	for _, s := range sources {
		fps, err := cabundle.Parse(s.PEM)
		if err != nil {
			continue
		}
		set := cabundle.NewCASetFromFingerprints("", fps...)
		if !containsAll(set, bundle) {
			continue
		}
		extra := set.Len() - want
		if prev, ok := byObject[s.Ref()]; ok && !betterKey(s, extra, prev, extraOf[s.Ref()]) {
			continue
		}
		byObject[s.Ref()], extraOf[s.Ref()] = s, extra
	}
	return byObject
}

// betterKey reports whether key s, holding extra certificates beyond the
// bundle, is a better CA source than prev (prevExtra).
func betterKey(s Source, extra int, prev Source, prevExtra int) bool {
	if extra != prevExtra {
		return extra < prevExtra
	}
	if (s.Key == guardapi.DefaultCAKey) != (prev.Key == guardapi.DefaultCAKey) {
		return s.Key == guardapi.DefaultCAKey
	}
	return s.Key < prev.Key
}

// placeCandidates sorts the candidates into those the workloads mount,
// those in the webhooks' own namespaces, and those elsewhere, each sorted.
func placeCandidates(byObject map[string]Source, mounted, own map[string]bool) (inMounted, inOwn, elsewhere []Source) {
	for ref, s := range byObject {
		switch {
		case mounted[ref]:
			inMounted = append(inMounted, s)
		case own[s.Namespace]:
			inOwn = append(inOwn, s)
		default:
			elsewhere = append(elsewhere, s)
		}
	}
	bySource := func(a, b Source) int { return cmp.Compare(a.Ref(), b.Ref()) }
	slices.SortFunc(inMounted, bySource)
	slices.SortFunc(inOwn, bySource)
	slices.SortFunc(elsewhere, bySource)
	return inMounted, inOwn, elsewhere
}
