package perf

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// apiWrite is one kind of owner write the benchmark has kube-apiserver
// admit.
type apiWrite struct {
	name string
	// kase is the policy that decides it (caseLit or caseParam).
	kase string
	// stored is every entry's caBundle before the write.
	stored func(s *apiServer) []byte
	// merge writes every entry's stored bundle followed by the current CA,
	// as cainjector merges; retime changes the first entry's timeout and no
	// caBundle (a chart upgrade's write; the least policy's write is the
	// same); otherwise the write changes an annotation, no entry.
	merge, retime bool
}

func curCA(s *apiServer) []byte     { return s.Cur.PEM }
func oldCA(s *apiServer) []byte     { return s.Old.PEM }
func oldAndCur(s *apiServer) []byte { return append(slices.Clone(s.Old.PEM), s.Cur.PEM...) }

// apiWrites: an ordinary write with the CA as a literal and as the CA
// Secret (a param); an ordinary write while every entry holds old+new (a
// merging writer's state for most of a CA's life); the merge itself. The
// ordinary writes change an annotation (kube-apiserver keeps the
// generation: the policies skip them on it) or, in the -spec rows, an
// entry's timeout (a new generation: the policies compare the entries).
// The merge under the param is decided by a policy variable, not the
// matchCondition: kube-apiserver derives the CA's shifted texts in CEL.
var apiWrites = []apiWrite{
	{name: "ordinary", kase: caseLit, stored: curCA},
	{name: "ordinary-param", kase: caseParam, stored: curCA},
	{name: "merged-state", kase: caseLit, stored: oldAndCur},
	{name: "ordinary-spec", kase: caseLit, stored: curCA, retime: true},
	{name: "ordinary-param-spec", kase: caseParam, stored: curCA, retime: true},
	{name: "merged-state-spec", kase: caseLit, stored: oldAndCur, retime: true},
	{name: "merge", kase: caseLit, stored: oldCA, merge: true},
	{name: "merge-param", kase: caseParam, stored: oldCA, merge: true},
}

// apiPairsPerOp is how many write pairs (the least policy's, the
// generated one's) one benchmark op is: the scrapes around each write make
// an op slow, and a ratio of few writes would be noise.
const apiPairsPerOp = 5

// BenchmarkAPIServer measures what a real kube-apiserver spends in its
// ValidatingAdmissionPolicy plugin on one owner write under the generated
// policy, against the least policy of caBundles in the same run (its
// ordinary write), read from kube-apiserver's own admission histogram
// (docs/performance.md). ns/write and least-ns/write are medians over the
// op's writes; x-least is their ratio. The largest sub-benchmark reports
// the largest configuration whose merge and merged-state writes pass.
func BenchmarkAPIServer(b *testing.B) {
	s := startAPIServer(b)
	for _, n := range entryCounts {
		objs := map[string]*admv1.ValidatingWebhookConfiguration{}
		for _, kase := range []string{caseLeast, caseFloor, caseLit, caseParam} {
			objs[kase] = s.create(b, apiConfig(fmt.Sprintf("bench-%s-%d", kase, n), kase, n, s.Cur.PEM))
		}
		for _, w := range apiWrites {
			b.Run(fmt.Sprintf("entries=%d/write=%s", n, w.name), func(b *testing.B) { s.run(b, objs, w) })
		}
	}
	b.Run("largest", s.largest)
}

// run measures write w against the least policy's ordinary write, pair by
// pair.
func (s *apiServer) run(b *testing.B, objs map[string]*admv1.ValidatingWebhookConfiguration, w apiWrite) {
	ctx := b.Context()
	var err error
	if objs[w.kase], err = s.setBundles(ctx, objs[w.kase], w.stored(s)); err != nil {
		b.Fatal(err)
	}
	if w.retime {
		if objs[caseFloor], err = s.setBundles(ctx, objs[caseFloor], w.stored(s)); err != nil {
			b.Fatal(err)
		}
	}
	var gen, least, floor []time.Duration
	b.ResetTimer()
	for range b.N * apiPairsPerOp {
		least = append(least, s.leastWrite(b, objs, w.retime))
		d, err := s.measure(ctx, s.setup(ctx, objs, w), s.write(ctx, objs, w))
		if err != nil {
			b.Fatalf("generated policy, %s write: %v", w.name, err)
		}
		gen = append(gen, d)
		if !w.retime {
			continue
		}
		if d, err = s.measureOrdinary(ctx, objs, caseFloor, true); err != nil {
			b.Fatalf("floor policy, %s write: %v", w.name, err)
		}
		floor = append(floor, d)
	}
	b.StopTimer()
	g := reportAgainstLeast(b, gen, least)
	if w.retime {
		f := median(floor)
		b.ReportMetric(float64(f.Nanoseconds()), "floor-ns/write")
		b.ReportMetric(float64(g)/float64(f), "x-floor")
	}
}

// reportAgainstLeast reports the medians of took and of least, per write,
// and their ratio; it returns took's.
func reportAgainstLeast(b *testing.B, took, least []time.Duration) time.Duration {
	t, l := median(took), median(least)
	b.ReportMetric(float64(t.Nanoseconds()), "ns/write")
	b.ReportMetric(float64(l.Nanoseconds()), "least-ns/write")
	b.ReportMetric(float64(t)/float64(l), "x-least")
	return t
}

// leastWrite measures the least policy's ordinary write (retime: an
// entry's timeout, otherwise an annotation).
func (s *apiServer) leastWrite(b *testing.B, objs map[string]*admv1.ValidatingWebhookConfiguration, retime bool) time.Duration {
	d, err := s.measureOrdinary(b.Context(), objs, caseLeast, retime)
	if err != nil {
		b.Fatalf("least policy, ordinary write: %v", err)
	}
	return d
}

// measureOrdinary measures the owner's ordinary write (ordinary) of the
// configuration of case kase, in the ValidatingAdmissionPolicy plugin.
func (s *apiServer) measureOrdinary(ctx context.Context, objs map[string]*admv1.ValidatingWebhookConfiguration, kase string, retime bool) (time.Duration, error) {
	return s.measure(ctx, nil, func() (err error) { objs[kase], err = s.ordinary(ctx, objs[kase], retime); return err })
}

// setup puts every entry of a merge's configuration back to its stored
// bundle, as break-glass: the previous merge left them merged.
func (s *apiServer) setup(ctx context.Context, objs map[string]*admv1.ValidatingWebhookConfiguration, w apiWrite) func() error {
	if !w.merge {
		return nil
	}
	return func() (err error) {
		objs[w.kase], err = s.setBundles(ctx, objs[w.kase], w.stored(s))
		return err
	}
}

// write is the owner's write w.
func (s *apiServer) write(ctx context.Context, objs map[string]*admv1.ValidatingWebhookConfiguration, w apiWrite) func() error {
	if !w.merge {
		return func() (err error) { objs[w.kase], err = s.ordinary(ctx, objs[w.kase], w.retime); return err }
	}
	return func() (err error) { objs[w.kase], err = s.mergeCur(ctx, objs[w.kase]); return err }
}

// ordinary is an owner write that leaves every caBundle alone: retime
// changes the first entry's timeout, otherwise an annotation.
func (s *apiServer) ordinary(ctx context.Context, c *admv1.ValidatingWebhookConfiguration, retime bool) (*admv1.ValidatingWebhookConfiguration, error) {
	if !retime {
		return s.annotate(ctx, c)
	}
	c = c.DeepCopy()
	t := ptr.Deref(c.Webhooks[0].TimeoutSeconds, 10)
	c.Webhooks[0].TimeoutSeconds = new(t%30 + 1)
	return s.owner.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
}

// annotate is an owner write that leaves every entry alone.
func (s *apiServer) annotate(ctx context.Context, c *admv1.ValidatingWebhookConfiguration) (*admv1.ValidatingWebhookConfiguration, error) {
	c = c.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	seq, _ := strconv.Atoi(c.Annotations["bench.webhook-guard.io/seq"])
	c.Annotations["bench.webhook-guard.io/seq"] = strconv.Itoa(seq + 1)
	return s.owner.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
}

// mergeCur is the owner writing, as cainjector merges, every entry's stored
// bundle followed by the current CA.
func (s *apiServer) mergeCur(ctx context.Context, c *admv1.ValidatingWebhookConfiguration) (*admv1.ValidatingWebhookConfiguration, error) {
	c = c.DeepCopy()
	for i := range c.Webhooks {
		c.Webhooks[i].ClientConfig.CABundle = append(slices.Clone(c.Webhooks[i].ClientConfig.CABundle), s.Cur.PEM...)
	}
	return s.owner.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
}

// largestSizes are the entry counts the largest sub-benchmark tries, until
// kube-apiserver refuses one.
var largestSizes = []int{100, 200, 300, 400, 600, 800}

// largest finds the largest configuration (of largestSizes) whose merge
// and, after it, an ordinary write in the merged state kube-apiserver
// admits under the generated policy, and logs why the next failed: a CEL
// cost refusal, or the size limits of a request or of etcd.
func (s *apiServer) largest(b *testing.B) {
	ctx := b.Context()
	largest, why := 0, "every size passed"
	for _, n := range largestSizes {
		c := s.create(b, apiConfig(fmt.Sprintf("bench-largest-%d", n), caseLit, n, s.Old.PEM))
		err := s.mergeAndWrite(ctx, c)
		_ = s.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, c.Name, metav1.DeleteOptions{})
		if err != nil {
			why = fmt.Sprintf("%d entries: %v", n, err)
			break
		}
		largest = n
	}
	if len(why) > 600 {
		// The middle is the validation's expression; kube-apiserver's
		// reason is at the end.
		why = why[:200] + " ... " + why[len(why)-400:]
	}
	b.Logf("largest configuration that passes: %d entries; then %s", largest, why)
	b.ReportMetric(float64(largest), "largest-entries")
}

// mergeAndWrite merges the current CA into every entry of c and then
// changes an entry's timeout (the costlier ordinary write), both as the
// owner.
func (s *apiServer) mergeAndWrite(ctx context.Context, c *admv1.ValidatingWebhookConfiguration) error {
	c, err := s.mergeCur(ctx, c)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if _, err := s.ordinary(ctx, c, true); err != nil {
		return fmt.Errorf("ordinary write in the merged state: %w", err)
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
