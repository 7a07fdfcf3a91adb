package perf

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// GenericHandler is the guard's decision behind controller-runtime's
// generic admission.Webhook, the way the guard was served before its
// one-pass decoder: the universal deserializer decodes the review, then each
// object is decoded a second time from its raw bytes. It exists only as the
// comparison row of BenchmarkGeneric; the guard itself has one request path
// (webhook.Handler). It skips the guard's own metrics and log calls, so it
// flatters the generic path slightly.
type GenericHandler struct{ Guard *webhook.Handler }

var _ admission.Handler = GenericHandler{}

// Handle implements admission.Handler.
func (g GenericHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	in, err := GenericInput(&req.AdmissionRequest)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	d := g.Guard.Decide(ctx, in)
	return admission.Response{AdmissionResponse: webhook.Response(&d)}
}

// GenericInput decodes a decoded AdmissionRequest's objects (the generic
// path's second decode) into the decision's input. It reads only what the
// benchmark's reviews carry: an UPDATE or CREATE of a webhook configuration.
func GenericInput(req *admissionv1.AdmissionRequest) (*policy.Input, error) {
	in := &policy.Input{
		Operation: policy.Operation(req.Operation),
		Kind:      policy.GuardedKind(req.Kind.Kind),
		Name:      req.Name,
		User:      policy.User{Username: req.UserInfo.Username, Groups: req.UserInfo.Groups},
		DryRun:    req.DryRun != nil && *req.DryRun,
	}
	var obj, old minimalConfig
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, &obj); err != nil {
		return nil, fmt.Errorf("request.object: %w", err)
	}
	in.Labels, in.Annotations = obj.Metadata.Labels, obj.Metadata.Annotations
	in.Entries = genericWebhooks(&obj)
	if len(req.OldObject.Raw) > 0 {
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(req.OldObject.Raw, &old); err != nil {
			return nil, fmt.Errorf("request.oldObject: %w", err)
		}
		in.Labels, in.Annotations = old.Metadata.Labels, old.Metadata.Annotations
		in.OldEntries = genericWebhooks(&old)
	}
	return in, nil
}

func genericWebhooks(o *minimalConfig) []policy.Entry {
	out := make([]policy.Entry, len(o.Webhooks))
	for i, w := range o.Webhooks {
		out[i] = policy.Entry{Name: w.Name, CABundle: w.ClientConfig.CABundle}
	}
	return out
}
