package probe

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// ConfigSource is the configuration in force (webhook.ConfigSource).
type ConfigSource interface {
	Current() *policy.Mappings
}

// Runner probes every guarded trust path each Interval, on the leader
// only, and reports the results.
type Runner struct {
	// Config says which objects are guarded.
	Config ConfigSource
	// Cached lists the webhook configurations, and the metadata of CRDs and
	// APIServices (a CRD's schemas are never cached).
	Cached client.Reader
	// Direct gets the guarded CRDs and APIServices, one GET each per round:
	// bounded by the mappings, which name these kinds by name.
	Direct client.Reader
	Prober *Prober
	// Reporter sets the series, on the leader only (Elected).
	Reporter *Reporter
	// Publisher keeps the trust-path ClusterReport, on the leader only;
	// nil publishes none.
	Publisher *Publisher
	// Served keeps each round's served chains for admission's write-time
	// check; nil keeps none.
	Served *Served
	// Elected is closed once this replica leads (the manager's Elected):
	// every replica probes, so that every replica can warn a writer at
	// write time, but only the leader exports the series (one series per
	// entry, not per replica). nil: this replica reports.
	Elected <-chan struct{}
	// Interval is the time between the starts of two rounds.
	Interval time.Duration
	Log      logr.Logger

	// lastPublishErr is the last publish error logged: a lasting failure
	// is logged once, not every round.
	lastPublishErr string
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica probes (see Elected).
func (r *Runner) NeedLeaderElection() bool { return false }

// leads reports whether this replica reports the series.
func (r *Runner) leads() bool {
	if r.Elected == nil {
		return true
	}
	select {
	case <-r.Elected:
		return true
	default:
		return false
	}
}

// Start probes until ctx ends; a round starts at once.
func (r *Runner) Start(ctx context.Context) error {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		r.Round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round probes the guarded paths once and reports them. A kind that
// cannot be listed is logged and left out of the round (its series are
// then deleted: a probe that did not run says nothing).
func (r *Runner) Round(ctx context.Context) []Result {
	paths := r.Paths(ctx)
	results := r.Prober.Probe(ctx, paths)
	if ctx.Err() != nil {
		return nil // cut short: not a finding
	}
	if r.Served != nil {
		r.Served.Store(results)
	}
	if !r.leads() {
		return results
	}
	r.Reporter.Report(results)
	if r.Publisher != nil {
		r.publish(ctx, results)
	}
	for _, res := range results {
		if !res.Verified() {
			k := res.Path.Key()
			r.Log.Info("trust path not verified", "kind", k.Kind, "configuration", k.Configuration, "webhook", k.Webhook,
				"reason", reasonLabel(res.Reason), "endpoint", boundText(res.Endpoint, maxWhereText), "error", boundText(res.Err.Error(), maxErrText))
		}
	}
	return results
}

// publish keeps the trust-path report; a lasting failure is logged once.
func (r *Runner) publish(ctx context.Context, results []Result) {
	err := r.Publisher.Publish(ctx, results)
	if err == nil {
		r.lastPublishErr = ""
		return
	}
	if err.Error() != r.lastPublishErr && ctx.Err() == nil {
		r.Log.Error(err, "the trust-path report is not up to date (the series are)")
	}
	r.lastPublishErr = err.Error()
}

// listTimeout bounds the listing of guarded objects in a round: a cached
// list waits for its informer's first sync, which never comes when the
// guard may not list a kind.
const listTimeout = 30 * time.Second

// Paths lists every guarded trust path, sorted by kind, configuration and
// webhook. Listing that takes longer than listTimeout leaves the kinds not
// yet listed out of the round.
func (r *Runner) Paths(ctx context.Context) []TrustPath {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	cfg := r.Config.Current()
	var out []TrustPath
	var vwcs admv1.ValidatingWebhookConfigurationList
	if err := r.Cached.List(ctx, &vwcs); err != nil {
		r.Log.Error(err, "not probing", "kind", policy.KindValidating)
	}
	for i := range vwcs.Items {
		out = append(out, ValidatingPaths(cfg, &vwcs.Items[i])...)
	}
	var mwcs admv1.MutatingWebhookConfigurationList
	if err := r.Cached.List(ctx, &mwcs); err != nil {
		r.Log.Error(err, "not probing", "kind", policy.KindMutating)
	}
	for i := range mwcs.Items {
		out = append(out, MutatingPaths(cfg, &mwcs.Items[i])...)
	}
	// The kinds whose objects hold one entry (CRDs, APIServices) are read
	// from their rows of guardapi.Kinds; the webhook configurations' lists
	// above are typed.
	for _, k := range guardapi.Kinds {
		if k.Entries.One() {
			out = append(out, r.trustObjectPaths(ctx, cfg, k)...)
		}
	}
	slices.SortFunc(out, func(a, b TrustPath) int {
		return strings.Compare(a.Kind+"/"+a.Configuration+"/"+a.Webhook, b.Kind+"/"+b.Configuration+"/"+b.Webhook)
	})
	return out
}

// trustObjectPaths lists the metadata of kind's objects and gets the
// guarded ones whole.
func (r *Runner) trustObjectPaths(ctx context.Context, cfg *policy.Mappings, info guardapi.KindInfo) []TrustPath {
	kind := policy.GuardedKind(info.Kind)
	gvk := schema.GroupVersionKind{Group: info.Group, Version: info.Version, Kind: info.Kind}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(string(kind) + "List"))
	if err := r.Cached.List(ctx, list); err != nil {
		r.Log.Error(err, "not probing", "kind", kind)
		return nil
	}
	var out []TrustPath
	for i := range list.Items {
		m := &list.Items[i]
		if _, ok := guarded(cfg, kind, m.Name, m.Labels); !ok {
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := r.Direct.Get(ctx, client.ObjectKey{Name: m.Name}, u); err != nil {
			if !errors.Is(err, context.Canceled) {
				r.Log.Error(err, "not probing", "kind", kind, "name", m.Name)
			}
			continue
		}
		if p, ok := TrustObjectPath(cfg, kind, u); ok {
			out = append(out, p)
		}
	}
	return out
}
