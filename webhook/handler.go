package webhook

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
	"github.com/webhook-guard/webhook-guard/policy/writebudget"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// Path is where the guard serves admission reviews.
const Path = "/validate"

// CAResolver resolves an owner's CA; casource.Resolver is the real one.
type CAResolver interface {
	Resolve(ctx context.Context, req casource.Request, live bool) casource.Result
}

// HandlerOptions are what a Handler is built from. NewHandler fills in the
// defaults, so no Handler runs with a nil recorder, metrics or clock.
type HandlerOptions struct {
	// Config is the configuration in force; required.
	Config ConfigSource
	// CA resolves owners' CAs; required.
	CA CAResolver
	// Metrics default to collectors on a private registry (nothing exports
	// them; `check` and tests that do not read them).
	Metrics *Metrics
	// Recorder defaults to recording nothing.
	Recorder Recorder
	// Now is the clock for flapping detection; time.Now by default.
	Now func() time.Time
	// AdmissionPolicyWriter is the guard's own username; only it (and
	// break-glass) may change the ValidatingAdmissionPolicies and bindings
	// the policy shape generates (policyobjects.go).
	AdmissionPolicyWriter string
	// Fingerprints memoizes caBundle parsing (a ~1 KB certificate costs
	// ~12 µs to parse; a hit, a map lookup); a cache of
	// cabundle.DefaultFingerprintCacheSize by default.
	Fingerprints *cabundle.FingerprintCache
	// Serving compares a written caBundle with what the entry's endpoint
	// served at the prober's last round (ProbedServing), to warn the
	// writer; nil warns of nothing.
	Serving policy.ServingCheck
	// Log is the base logger; per-request fields are added to it.
	// controller-runtime's "admission" logger by default.
	Log logr.Logger
}

// handlerOptions names the embedded options with a lower-case name: outside
// this package a Handler cannot be written as a literal, only built by
// NewHandler, while its fields still read as h.Config, h.CA, h.Metrics.
type handlerOptions = HandlerOptions

// Handler decides admission requests for webhook configurations and serves
// them over HTTP (review.go): the one request path, used by `serve`,
// `check` and the tests alike.
type Handler struct {
	handlerOptions

	flap flapping.Current

	budgets *writebudget.Limiter

	mismatches confirmedMismatches
}

// NewHandler builds a Handler from o, with the defaults above.
func NewHandler(o HandlerOptions) (*Handler, error) {
	if o.Config == nil {
		return nil, errors.New("webhook handler: HandlerOptions.Config is required")
	}
	if o.CA == nil {
		return nil, errors.New("webhook handler: HandlerOptions.CA is required")
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if o.Recorder == nil {
		o.Recorder = Recorders(nil)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Fingerprints == nil {
		o.Fingerprints = cabundle.NewFingerprintCache(cabundle.DefaultFingerprintCacheSize)
	}
	if o.Log.GetSink() == nil {
		o.Log = logf.Log.WithName("admission")
	}
	return &Handler{handlerOptions: o, budgets: writebudget.NewLimiter()}, nil
}

// decideAndRespond decides a decoded input, observes the decision and
// builds the response.
func (h *Handler) decideAndRespond(ctx context.Context, in *policy.Input) (policy.Decision, admissionv1.AdmissionResponse) {
	start := time.Now()
	d := h.evaluate(ctx, in, limiterBudget{h})
	d.Write = in.Write
	if d.Rule == policy.RuleWriteBudget {
		h.Metrics.WriteBudgetExceeded.WithLabelValues(d.Mapping, string(d.Mode)).Inc()
		requestLog(ctx).V(1).Info("write budget exceeded", "mapping", d.Mapping, "retryAfterSeconds", d.RetryAfterSeconds)
	}
	h.Metrics.DecisionDuration.WithLabelValues(string(d.Outcome)).Observe(time.Since(start).Seconds())
	h.observe(ctx, &d)
	return d, Response(&d)
}

// Decide decides in as admission does (policy.Evaluate with admission's CA
// lookup, see admissionLookup), without counting it against a write
// budget, observing or recording it.
func (h *Handler) Decide(ctx context.Context, in *policy.Input) policy.Decision {
	return h.evaluate(ctx, in, nil)
}

// evaluate is policy.Evaluate with admission's CA lookup and budget.
func (h *Handler) evaluate(ctx context.Context, in *policy.Input, budget policy.Budget) policy.Decision {
	if in.Fingerprints == nil {
		in.Fingerprints = h.Fingerprints
	}
	lookup := &admissionLookup{ctx: ctx, h: h}
	d := h.Config.Current().Evaluate(in, policy.Env{CA: lookup, Budget: budget, Serving: h.Serving})
	lookup.settle(&d)
	return d
}

func (h *Handler) resolve(ctx context.Context, owner *guardapi.Owner, req casource.Request, live bool) casource.Result {
	res := h.CA.Resolve(ctx, req, live)
	if res.Err != nil || res.Stale {
		h.Metrics.CASourceErrors.WithLabelValues(owner.Name, sourceLabel(owner, res.Source)).Inc()
		reason := "source unreadable"
		if res.Err != nil {
			reason = res.Err.Error()
		}
		requestLog(ctx).Info("owner CA source error", "mapping", owner.Name, "source", res.Source, "stale", res.Stale, "reason", reason)
	}
	// A cached answer was exported when it was read (here or by the
	// CAExpiryWatcher): only a read can change the gauge.
	if res.Err == nil && !res.Cached && !res.Set.NotAfter().IsZero() {
		h.Metrics.OwnerCAExpiry.WithLabelValues(owner.Name).Set(float64(res.Set.NotAfter().Unix()))
	}
	return res
}

// sourceLabel is the source label of a CA source error: the configured
// source's description, bounded by the configuration; for
// injectedByCertManager, whose source a request's annotation names, only
// the source kind (a label value per annotation value would grow without
// bound).
func sourceLabel(owner *guardapi.Owner, source string) string {
	if owner.CA.InjectedByCertManager != nil {
		return "injectedByCertManager"
	}
	return source
}

// observe counts, logs and records a decision, and feeds flapping detection.
func (h *Handler) observe(ctx context.Context, d *policy.Decision) {
	h.Metrics.Decisions.WithLabelValues(d.Mapping, string(d.Rule), string(d.Outcome)).Inc()
	switch {
	case d.Outcome != policy.OutcomeAllow:
		requestLog(ctx).Info(string(d.Outcome), "mapping", d.Mapping, "rule", d.Rule, "decision", d.Outcome, "subject", d.Subject,
			"message", d.Message())
	case logf.FromContext(ctx).V(1).Enabled():
		requestLog(ctx).V(1).Info("allowed", "mapping", d.Mapping, "rule", d.Rule, "decision", d.Outcome, "subject", d.Subject)
	}
	if d.Record {
		h.Metrics.Records.WithLabelValues(d.Mapping, string(d.Rule), string(d.Outcome)).Inc()
		h.Recorder.RecordDecision(ctx, d)
	}
	if d.Mapping == "" {
		return
	}
	if report, flapping := h.flapDetector().Observe(d, h.now()); flapping {
		// The name label only for a name the mapping lists: a selector
		// mapping claims names requests choose (the Event names it).
		name := ""
		if h.Config.Current().NamesConfiguration(report.Kind, report.Name) {
			name = report.Name
		}
		h.Metrics.FlappingDetected.WithLabelValues(d.Mapping, string(report.Kind), name).Inc()
		h.Recorder.RecordFlapping(ctx, d.Mapping, report)
	}
}

// flapDetector returns the detector for the settings in force, replacing
// it when a reload changed them.
func (h *Handler) flapDetector() *flapping.Detector {
	return h.flap.For(h.Config.Current().Spec.Flapping)
}

func (h *Handler) now() time.Time { return h.Now() }

// statusCode is the HTTP status code of the admission response: 429 for a
// write over its budget (the client may retry), 403 for any other denial.
func statusCode(d *policy.Decision) int32 {
	switch {
	case d.Allowed():
		return http.StatusOK
	case d.Rule == policy.RuleWriteBudget:
		return http.StatusTooManyRequests
	}
	return http.StatusForbidden
}

// Response turns a decision into the admission response: enforce denials
// are 403s with the full message; audit and break-glass are allowed with
// warnings kubectl prints; every non-trivial decision carries audit
// annotations for kube-apiserver's audit log.
func Response(d *policy.Decision) admissionv1.AdmissionResponse {
	r := admissionv1.AdmissionResponse{
		Allowed:          d.Allowed(),
		Warnings:         d.Warnings(),
		AuditAnnotations: d.AuditAnnotations(),
		Result:           &metav1.Status{Code: statusCode(d)},
	}
	if !d.Allowed() {
		r.Result.Status = metav1.StatusFailure
		r.Result.Reason = metav1.StatusReasonForbidden
		r.Result.Message = d.Message()
	}
	if !d.Allowed() && d.RetryAfterSeconds > 0 {
		// kube-apiserver passes the status through (code included) and
		// turns details.retryAfterSeconds into the Retry-After header,
		// which client-go waits for before it retries.
		r.Result.Reason = metav1.StatusReasonTooManyRequests
		r.Result.Details = &metav1.StatusDetails{Name: d.Name, Kind: string(d.Kind), RetryAfterSeconds: d.RetryAfterSeconds}
	}
	return r
}

// IsInputError reports whether err is a malformed-request error.
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}
