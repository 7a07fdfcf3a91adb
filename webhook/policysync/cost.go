package policysync

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"

	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/policy/vap/cost"
	"github.com/webhook-guard/webhook-guard/webhook/policyca"
)

// CostMargin is the share of kube-apiserver's CEL cost limit at which a
// mapping's worst owner write (policy/vap/cost) is reported: the gauge, an
// error log, an Event and the alert WebhookGuardPolicyCostNearLimit. Not
// 100%: the check runs the policies with a stand-in for the next CA of the
// owner's CA's size, and the owner's next CA may be larger (a longer key,
// a chain), and entries may be added between two passes; 80% leaves a
// fifth of the limit for both, so that the alert comes before any
// rotation can be refused.
const CostMargin = 0.8

// maxCostChecks bounds the objects one pass runs the check on afresh (a
// result cached for the object's resourceVersion and the mapping's
// policies costs nothing): at most a few hundred milliseconds of CPU per
// pass. What is left is checked at the next passes.
const maxCostChecks = 4

// costKey names one check: an object at a resourceVersion, under the
// policies of one mapping as generated from one configuration and CA.
type costKey struct {
	mapping, object, resourceVersion, policies string
}

// costOf is what the check found for one object.
type costOf struct {
	mapping, object string
	// worst is the costlier of the owner's worst writes.
	worst cost.Result
	obj   *unstructured.Unstructured
}

// checkCosts runs the owner's worst writes on every configuration a
// mapping guards (guardedObjects), from the cache where the object and the
// mapping's policies are as they were. It returns the mappings at or over
// CostMargin, sets webhook_guard_policy_worst_write_cost_ratio for every
// object checked (and deletes the series of objects no longer guarded),
// and logs each object over the margin.
//
// Such a mapping's policies still fail closed (failurePolicy Fail): a write
// whose evaluation runs out of budget is refused, never admitted unchecked,
// since the writes that cost most are the ones with the most caBundles to
// check, a foreign CA among them. What keeps the owner's rotation under
// the limit is the policies' cost itself: each entry is looked up in the
// stored object through a map, so the worst write grows with the bytes of
// caBundle text, not with the square of the entries, and stays under the
// margin up to configurations far larger than any product writes
// (policy/vap/cost's Test_Check_sizeBound). The report tells the owner to
// split a configuration long before its rotation could be refused.
func (s *Syncer) checkCosts(ctx context.Context, cfg *policy.Mappings, res policyca.Resolution) map[string]bool {
	// The checks run without the lock (a check may take most of a second);
	// only the pass's own goroutine writes the cache.
	s.mu.Lock()
	prev, prevSeries := s.costs, s.costSeries
	s.mu.Unlock()
	costly := map[string]bool{}
	seen := map[costKey]costOf{}
	fresh := 0
	for i := range cfg.Spec.Owners {
		o := &cfg.Spec.Owners[i]
		ca, ok := res.CAs[o.Name]
		if !ok || ca.Err != "" {
			continue // no CA: the policy denies every caBundle change at no cost
		}
		gen := policiesKey(cfg, ca)
		var checker *cost.Checker
		for _, obj := range s.guardedObjects(ctx, o.Match) {
			key := costKey{mapping: o.Name, object: obj.GetKind() + "/" + obj.GetName(), resourceVersion: obj.GetResourceVersion(), policies: gen}
			c, cached := prev[key]
			if !cached {
				if fresh >= maxCostChecks {
					s.Trigger() // the rest at the next pass
					keepLast(prev, key, seen, costly)
					continue
				}
				fresh++
				var err error
				if checker == nil {
					checker, err = cost.New(cfg, o.Name, ca)
				}
				if err == nil {
					c, err = check(ctx, checker, key, obj)
				}
				if err != nil {
					// Logged once per key, not at every pass: a check that
					// cannot compile (a CA past kube-apiserver's expression
					// limit, which the refusal reports) would fail the same
					// way, at the cost of compiling it again.
					s.Log.Error(err, "policy shape: cannot check the cost of the mapping's policies", "mapping", o.Name, "configuration", key.object)
					if ctx.Err() != nil {
						continue // the pass was stopped: check it again
					}
					c = costOf{mapping: o.Name, object: key.object}
				}
			}
			seen[key] = c
			if s.reportCost(c, !cached) {
				costly[o.Name] = true
			}
		}
	}
	series := map[[2]string]bool{}
	for key, c := range seen {
		if c.worst.Write != "" {
			series[[2]string{key.mapping, key.object}] = true
		}
	}
	for old := range prevSeries {
		if !series[old] {
			s.Metrics.WorstWriteCost.DeleteLabelValues(old[0], old[1])
		}
	}
	s.mu.Lock()
	s.costs, s.costSeries = seen, series
	s.mu.Unlock()
	return costly
}

// keepLast keeps key's last result for a pass with no room to check it
// again: until the next pass checks it, the object's last result stands,
// so that a mapping over the margin is not written with Fail for one pass
// because its objects changed.
func keepLast(prev map[costKey]costOf, key costKey, seen map[costKey]costOf, costly map[string]bool) {
	if lastKey, last, ok := lastResult(prev, key); ok {
		seen[lastKey] = last
		costly[key.mapping] = costly[key.mapping] || last.worst.Ratio() >= CostMargin
	}
}

// lastResult is the last pass's result for key's mapping and object at
// any resourceVersion.
func lastResult(prev map[costKey]costOf, key costKey) (costKey, costOf, bool) {
	for k, c := range prev {
		if k.mapping == key.mapping && k.object == key.object {
			return k, c, true
		}
	}
	return costKey{}, costOf{}, false
}

// check runs the owner's worst writes on obj and keeps the costlier.
func check(ctx context.Context, checker *cost.Checker, key costKey, obj *unstructured.Unstructured) (costOf, error) {
	rs, err := checker.Check(ctx, obj)
	if err != nil {
		return costOf{}, err
	}
	c := costOf{mapping: key.mapping, object: key.object, obj: obj}
	for _, r := range rs {
		if r.Ratio() > c.worst.Ratio() || c.worst.Write == "" {
			c.worst = r
		}
	}
	return c, nil
}

// reportCost sets c's gauge and reports whether it is at or over
// CostMargin; a fresh result over it is logged as an error.
func (s *Syncer) reportCost(c costOf, fresh bool) bool {
	if c.worst.Write == "" {
		return false // no entries: no such write
	}
	s.Metrics.WorstWriteCost.WithLabelValues(c.mapping, c.object).Set(c.worst.Ratio())
	if c.worst.Ratio() < CostMargin {
		return false
	}
	if fresh {
		msg := cost.Describe(c.mapping, c.obj, c.worst) + fmt.Sprintf(", at or over the guard's margin of %.0f%% of the limit", 100*CostMargin)
		if c.worst.Refused() {
			msg = cost.Refusal(c.mapping, c.obj, c.worst)
		}
		s.Log.Error(errors.New(msg),
			"policy shape: a worst-case owner write is over the guard's margin of kube-apiserver's CEL cost limit; the mapping's policies still fail closed, so kube-apiserver refuses a write it cannot decide within the limit, the owner's rotation included: split the configuration",
			"mapping", c.mapping, "configuration", c.object, "entries", c.worst.Entries, "write", string(c.worst.Write),
			"cost", c.worst.Cost, "limit", cost.PerCallLimit, "ratio", c.worst.Ratio(), "margin", CostMargin)
	}
	return true
}

// policiesKey names the policies a mapping is generated as from cfg and
// ca: a new configuration or CA is a new key.
func policiesKey(cfg *policy.Mappings, ca vap.CA) string {
	h := sha256.New()
	h.Write(ca.PEM)
	if ca.Param != nil {
		fmt.Fprintf(h, "\x00%s/%s/%s", ca.Param.Namespace, ca.Param.Name, ca.Param.Key)
	}
	return fmt.Sprintf("%p/%x", cfg, h.Sum(nil))
}

// guardedObjects are the webhook configurations m guards that exist: those
// it names, as Sources holds them (its watches start a pass when one
// changes), and those its label selector selects, listed from the API
// server at each pass (a selector names nothing to watch: a configuration
// it selects is checked at the next pass after it appears or grows, which
// the interval bounds and CostMargin leaves room for). One named and
// selected is checked once.
func (s *Syncer) guardedObjects(ctx context.Context, m guardapi.Match) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	seen := map[string]bool{}
	add := func(obj client.Object, kind string) {
		if seen[kind+"/"+obj.GetName()] {
			return
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return
		}
		o := &unstructured.Unstructured{Object: u}
		o.SetGroupVersionKind(admv1.SchemeGroupVersion.WithKind(kind))
		seen[kind+"/"+obj.GetName()] = true
		out = append(out, o)
	}
	read := func(obj client.Object, kind, name string) {
		if err := s.Sources.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			if !apierrors.IsNotFound(err) {
				s.Log.Error(err, "policy shape: cannot read a guarded configuration to check its cost", "configuration", kind+"/"+name)
			}
			return
		}
		add(obj, kind)
	}
	for _, name := range m.Validating {
		read(&admv1.ValidatingWebhookConfiguration{}, guardapi.KindValidatingWebhookConfiguration, name)
	}
	for _, name := range m.Mutating {
		read(&admv1.MutatingWebhookConfiguration{}, guardapi.KindMutatingWebhookConfiguration, name)
	}
	if m.LabelSelector == nil {
		return out
	}
	selector, err := metav1.LabelSelectorAsSelector(m.LabelSelector)
	if err != nil {
		// policy.Load refuses such a selector; nothing to list.
		return out
	}
	sel := client.MatchingLabelsSelector{Selector: selector}
	var validating admv1.ValidatingWebhookConfigurationList
	if err := s.Reader.List(ctx, &validating, sel); err != nil {
		s.Log.Error(err, "policy shape: cannot list the configurations a mapping selects to check their cost", "kind", guardapi.KindValidatingWebhookConfiguration, "selector", selector.String())
	}
	for i := range validating.Items {
		add(&validating.Items[i], guardapi.KindValidatingWebhookConfiguration)
	}
	var mutating admv1.MutatingWebhookConfigurationList
	if err := s.Reader.List(ctx, &mutating, sel); err != nil {
		s.Log.Error(err, "policy shape: cannot list the configurations a mapping selects to check their cost", "kind", guardapi.KindMutatingWebhookConfiguration, "selector", selector.String())
	}
	for i := range mutating.Items {
		add(&mutating.Items[i], guardapi.KindMutatingWebhookConfiguration)
	}
	return out
}

// Reasons of the cost check's Events.
const (
	ReasonPolicyCostNearLimit   = "PolicyCostNearLimit"
	ReasonPolicyCostWithinLimit = "PolicyCostWithinLimit"
)

// reportCostly writes an Event about a mapping's main policy when the
// mapping goes over CostMargin and when it is back under: once per change,
// not once per pass. The error log and the gauge name the configuration;
// the Event is where `kubectl describe` and event exporters see it.
func (s *Syncer) reportCostly(objs *vap.Objects, prev, now map[string]bool) {
	for _, m := range slices.Sorted(maps.Keys(now)) {
		if !prev[m] {
			s.event(objs, m, "Warning", ReasonPolicyCostNearLimit, fmt.Sprintf(
				"a worst-case owner write to a configuration of mapping %q is at or over %.0f%% of kube-apiserver's CEL cost limit "+
					"(webhook_guard_policy_worst_write_cost_ratio names it); its policies still fail closed, so a write kube-apiserver "+
					"cannot decide within the limit is refused, the owner's rotation included: split the configuration", m, 100*CostMargin))
		}
	}
	for _, m := range slices.Sorted(maps.Keys(prev)) {
		if !now[m] {
			s.event(objs, m, "Normal", ReasonPolicyCostWithinLimit, fmt.Sprintf(
				"every configuration of mapping %q is under %.0f%% of kube-apiserver's CEL cost limit again", m, 100*CostMargin))
		}
	}
}
