package static

import (
	"net/url"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// Input is what the static ValidatingWebhookConfiguration is generated from.
type Input struct {
	// URL is where kube-apiserver calls the guard: https, reachable from
	// kube-apiserver (loopback: the guard runs beside it).
	URL string
	// CABundle is the PEM CA that signed the guard's serving certificate,
	// written into the manifest as given.
	CABundle []byte
	// BreakGlass are the subjects sent to the fail-open entry instead of
	// the enforcing one.
	BreakGlass guardapi.Subjects
	// FailurePolicy is the enforcing entry's: Fail rejects writes of webhook
	// configurations while the guard is down, Ignore lets them pass
	// unguarded.
	FailurePolicy admv1.FailurePolicyType
	// TimeoutSeconds is how long kube-apiserver waits for the guard.
	TimeoutSeconds int32
	// TrustObjects are the names the mappings give the objects of each kind
	// whose trust alone a mapping owns (guardapi.KindInfo.OwnsTrustOnly:
	// CustomResourceDefinitions, APIServices), by kind (TrustObjectsOf): the
	// enforcing entry receives writes of these alone (matchConditions by
	// name), so that a guard outage blocks writes of no other CRD or
	// APIService.
	TrustObjects map[string][]string
	// GuardServiceAccount ("namespace/name") adds the entry that sends
	// writes of the policy shape's generated objects by anyone else to the
	// guard; empty leaves it out.
	GuardServiceAccount string
	// Skip, when set, adds the enforcing entry's skip condition: the writes
	// whose answer is always "allowed" are decided by kube-apiserver alone
	// (skip.go). Nil sends every write to the guard.
	Skip *Skip
}

// validate returns every input kube-apiserver would reject in the manifest
// or could not use, named by its Input field. kube-apiserver checks a static
// manifest only when it loads the file, where a bad one is a log line on a
// control-plane node rather than an error here.
func (in Input) validate() field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateURL(field.NewPath("URL"), in.URL)...)
	if _, err := cabundle.Parse(in.CABundle); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("CABundle"), field.OmitValueType{}, "the data "+err.Error()))
	}
	if in.FailurePolicy != admv1.Fail && in.FailurePolicy != admv1.Ignore {
		errs = append(errs, field.NotSupported(field.NewPath("FailurePolicy"), in.FailurePolicy, []admv1.FailurePolicyType{admv1.Fail, admv1.Ignore}))
	}
	// kube-apiserver's bounds for a webhook's timeoutSeconds.
	if in.TimeoutSeconds < 1 || in.TimeoutSeconds > 30 {
		errs = append(errs, field.Invalid(field.NewPath("TimeoutSeconds"), in.TimeoutSeconds, "must be in 1..30"))
	}
	if sa := in.GuardServiceAccount; sa != "" {
		if _, _, ok := guardapi.SplitServiceAccount(sa); !ok {
			errs = append(errs, field.Invalid(field.NewPath("GuardServiceAccount"), sa, `must be "namespace/name"`))
		}
	}
	if in.Skip != nil {
		if err := in.Skip.validate(); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("Skip"), field.OmitValueType{}, err.Error()))
		}
	}
	return errs
}

// validateURL applies kube-apiserver's rules for a webhook URL with https
// required, so that a manifest it would refuse to load is never generated.
func validateURL(p *field.Path, raw string) field.ErrorList {
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Invalid(p, raw, err.Error())}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, raw, "must be an https URL"))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(p, raw, "must name a host"))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, raw, "must not carry user information"))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		errs = append(errs, field.Invalid(p, raw, "must not carry a query or a fragment"))
	}
	return errs
}
