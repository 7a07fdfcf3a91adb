package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// Scale target: 1,000 mappings, 950 matched by name and 50 by label
// selector, each with its own CA Secret.
const (
	scaleMappings  = 1000
	scaleSelectors = 50
	// scaleOwner is the name-matched mapping the generated review belongs to.
	scaleOwner = 500
)

// scaleConfigYAML is the 1,000-mapping GuardConfig. Mapping scaleOwner
// matches the generated review's configuration by name; selector mapping
// j matches configurations labelled webhook-guard.io/owner=sel-j.
func scaleConfigYAML() string {
	var b strings.Builder
	b.WriteString("apiVersion: webhook-guard.io/v1alpha1\nkind: GuardConfig\ndefaultMode: enforce\nbreakGlass:\n  groups: [system:masters]\nowners:\n")
	for i := range scaleMappings {
		name, writer := fmt.Sprintf("owner-%d", i), fmt.Sprintf("ns-%d/sa-%d", i, i)
		fmt.Fprintf(&b, "  - name: %s\n    match:\n", name)
		switch {
		case i == scaleOwner:
			fmt.Fprintf(&b, "      validating: [%s]\n", ConfigName)
			writer = OwnerNamespace + "/" + OwnerSA
		case i >= scaleMappings-scaleSelectors:
			fmt.Fprintf(&b, "      labelSelector: {matchLabels: {webhook-guard.io/owner: sel-%d}}\n", i)
		default:
			fmt.Fprintf(&b, "      validating: [cfg-%d]\n      mutating: [cfg-%d]\n", i, i)
		}
		fmt.Fprintf(&b, "    writers:\n      serviceAccounts: [%s]\n", writer)
		fmt.Fprintf(&b, "    ca:\n      secret: {namespace: ns-%d, name: ca-%d, key: ca.crt}\n", i, i)
	}
	return b.String()
}

// scaleGuard is a Handler over the 1,000-mapping config with all 1,000 CA
// sources read once (a warm cache).
func scaleGuard(b *testing.B, f *Fixture) (h *webhook.Handler, cacheBytes float64) {
	b.Helper()
	secrets := make([]*corev1.Secret, scaleMappings)
	for i := range secrets {
		secrets[i] = OwnerSecret(fmt.Sprintf("ns-%d", i), fmt.Sprintf("ca-%d", i), f)
	}
	h, err := Guard(f, scaleConfigYAML(), secrets...)
	if err != nil {
		b.Fatal(err)
	}
	cfg := h.Config.Current()
	before := heap()
	for i := range cfg.Spec.Owners {
		res := h.CA.Resolve(context.Background(), casource.Request{Owner: &cfg.Spec.Owners[i]}, false)
		if res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	return h, heap() - before
}

// heap is the live heap after a collection.
func heap() float64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

func decodedInput(b *testing.B, f *Fixture) policy.Input {
	b.Helper()
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(f.Review, &review); err != nil {
		b.Fatal(err)
	}
	in, err := GenericInput(review.Request)
	if err != nil {
		b.Fatal(err)
	}
	return *in
}

// BenchmarkScale: loading the 1,000-mapping config, and one decision (CA
// lookup in the warm cache included, decoding excluded) against it and
// against a single mapping.
func BenchmarkScale(b *testing.B) {
	f := fixtureFor(b, 5)
	base := decodedInput(b, f)
	decide := func(b *testing.B, h *webhook.Handler, in policy.Input) {
		ctx := context.Background()
		if d := h.Decide(ctx, &in); d.Outcome != policy.OutcomeAllow {
			b.Fatalf("decision %s %s, want allow: %s", d.Outcome, d.Rule, d.Message())
		}
		b.ReportAllocs()
		for b.Loop() {
			in := in
			h.Decide(ctx, &in)
		}
	}

	one, err := Guard(f, GuardConfigYAML)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("mappings=1/decide-by-name", func(b *testing.B) { decide(b, one, base) })

	many, cacheBytes := scaleGuard(b, f)
	doc := []byte(scaleConfigYAML())
	before := heap()
	loaded, err := policy.Load(doc)
	if err != nil {
		b.Fatal(err)
	}
	configBytes := heap() - before
	runtime.KeepAlive(loaded)

	b.Run("mappings=1000/decide-by-name", func(b *testing.B) { decide(b, many, base) })
	b.Run("mappings=1000/decide-by-selector", func(b *testing.B) {
		in := base
		in.Name = "selected-webhook-configuration"
		in.Labels = map[string]string{"webhook-guard.io/owner": fmt.Sprintf("sel-%d", scaleMappings-1)}
		// The selected mapping's writer is ns-999/sa-999.
		in.User = policy.User{Username: fmt.Sprintf("system:serviceaccount:ns-%d:sa-%d", scaleMappings-1, scaleMappings-1)}
		decide(b, many, in)
	})
	b.Run("mappings=1000/load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := policy.Load(doc); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(doc))/1024, "KiB-yaml")
	})
	b.Run("mappings=1000/memory", func(b *testing.B) {
		// Not a timing: the heap the loaded config and the warm cache of
		// 1,000 CA sources keep alive.
		for b.Loop() {
		}
		b.ReportMetric(configBytes/(1<<20), "MiB-config")
		b.ReportMetric(cacheBytes/1024, "KiB-ca-cache")
	})
	runtime.KeepAlive(many)
}
