package webhook

import (
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"

	"github.com/webhook-guard/webhook-guard/policy"
)

// admissionregistration.k8s.io/v1 is the only version the guard is
// registered for; anything else is a misconfiguration, not something to allow.
// Besides the two webhook configuration kinds decoded here, the handler
// decides ValidatingAdmissionPolicies and bindings (policy mode's generated
// objects, policyobjects.go) before DecodeInput is called; every other kind
// is still rejected with a 400.
const guardedGroup, guardedVersion = "admissionregistration.k8s.io", "v1"

// webhookConfiguration holds only what the decision reads from a
// Validating- or MutatingWebhookConfiguration. Decoding into it is
// case-sensitive (sigs.k8s.io/json, as kube-apiserver decodes), and it skips
// everything else, so it costs a fraction of decoding the full typed object.
type webhookConfiguration struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Webhooks []struct {
		Name         string `json:"name"`
		ClientConfig struct {
			CABundle []byte `json:"caBundle"`
		} `json:"clientConfig"`
	} `json:"webhooks"`
}

// InputError is a request the guard cannot decide because it is malformed.
// It is answered with a 400 and the request is rejected: an undecodable
// request is never allowed by accident.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// reviewRequest is the part of an admission.k8s.io AdmissionRequest the
// decision reads. The review handler decodes a whole AdmissionReview into it
// in one pass, objects included; DecodeInput fills it from a decoded
// admissionv1.AdmissionRequest. Either way the same checks below apply.
type reviewRequest struct {
	UID       types.UID               `json:"uid"`
	Kind      metav1.GroupVersionKind `json:"kind"`
	Name      string                  `json:"name"`
	Operation admissionv1.Operation   `json:"operation"`
	UserInfo  struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"userInfo"`
	Object    *webhookConfiguration `json:"object"`
	OldObject *webhookConfiguration `json:"oldObject"`
	DryRun    *bool                 `json:"dryRun"`
}

// DecodeInput turns an AdmissionRequest into the decision's input.
func DecodeInput(req *admissionv1.AdmissionRequest) (*policy.Input, error) {
	r := reviewRequest{UID: req.UID, Kind: req.Kind, Name: req.Name, Operation: req.Operation, DryRun: req.DryRun}
	r.UserInfo.Username, r.UserInfo.Groups = req.UserInfo.Username, req.UserInfo.Groups
	return r.input(func(field string, kind policy.ConfigKind) (*webhookConfiguration, error) {
		raw := req.Object.Raw
		if field == fieldOldObject {
			raw = req.OldObject.Raw
		}
		return decodeObject(field, raw, kind)
	})
}

const fieldObject, fieldOldObject = "request.object", "request.oldObject"

// input checks the request and builds the decision's input; object returns
// the decoded request.object or request.oldObject (only those the operation
// reads are asked for) or why it is missing or malformed.
func (r *reviewRequest) input(object func(field string, kind policy.ConfigKind) (*webhookConfiguration, error)) (*policy.Input, error) {
	if r.UID == "" && r.Kind.Kind == "" && r.Operation == "" && r.UserInfo.Username == "" {
		return nil, inputErrorf("the body holds no admission request: expected an admission.k8s.io/v1 AdmissionReview with a request")
	}
	if r.UID == "" {
		return nil, inputErrorf("request.uid is missing")
	}
	if r.Kind.Group != guardedGroup || r.Kind.Version != guardedVersion {
		return nil, inputErrorf("request.kind %s is not guarded: expected %s/%s %s or %s; check the rules of the webhook registration",
			r.Kind.String(), guardedGroup, guardedVersion, policy.KindValidating, policy.KindMutating)
	}
	kind := policy.ConfigKind(r.Kind.Kind)
	if kind != policy.KindValidating && kind != policy.KindMutating {
		return nil, inputErrorf("request.kind %s is not guarded: expected %s or %s", r.Kind.Kind, policy.KindValidating, policy.KindMutating)
	}
	in := &policy.Input{
		Operation: policy.Operation(r.Operation),
		Kind:      kind,
		Name:      r.Name,
		User:      policy.User{Username: r.UserInfo.Username, Groups: r.UserInfo.Groups},
		DryRun:    r.DryRun != nil && *r.DryRun,
	}
	if in.User.Username == "" {
		return nil, inputErrorf("request.userInfo.username is missing")
	}
	var obj, old *webhookConfiguration
	var err error
	switch in.Operation {
	case policy.OperationCreate:
		obj, err = object(fieldObject, kind)
	case policy.OperationUpdate:
		if obj, err = object(fieldObject, kind); err == nil {
			old, err = object(fieldOldObject, kind)
		}
	case policy.OperationDelete:
		old, err = object(fieldOldObject, kind)
	default:
		return nil, inputErrorf("request.operation %q is not guarded: expected CREATE, UPDATE or DELETE", r.Operation)
	}
	if err != nil {
		return nil, err
	}
	meta := obj
	if meta == nil {
		meta = old
	}
	if in.Name == "" {
		in.Name = meta.Metadata.Name
	}
	if meta.Metadata.Name != "" && meta.Metadata.Name != in.Name {
		return nil, inputErrorf("request.name %q does not match the object's metadata.name %q", in.Name, meta.Metadata.Name)
	}
	in.Labels, in.Annotations = meta.Metadata.Labels, meta.Metadata.Annotations
	if old != nil && in.Operation == policy.OperationUpdate {
		// The owning mapping (by label selector) and the CA source annotation
		// are read from the stored object, so a request can neither move the
		// configuration out of its owner's selector nor redirect its own CA
		// check by rewriting its labels or annotations.
		in.Labels, in.Annotations = old.Metadata.Labels, old.Metadata.Annotations
	}
	in.Webhooks, in.OldWebhooks = webhooks(obj), webhooks(old)
	return in, nil
}

func decodeObject(field string, raw []byte, kind policy.ConfigKind) (*webhookConfiguration, error) {
	if len(raw) == 0 {
		return nil, inputErrorf("%s is missing", field)
	}
	var obj webhookConfiguration
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &obj); err != nil {
		return nil, inputErrorf("%s does not decode as a %s: %v", field, kind, err)
	}
	return checkObject(field, &obj, kind)
}

// checkObject checks a decoded object against request.kind.
func checkObject(field string, obj *webhookConfiguration, kind policy.ConfigKind) (*webhookConfiguration, error) {
	if obj.Kind != "" && obj.Kind != string(kind) {
		return nil, inputErrorf("%s is a %s, but request.kind says %s", field, obj.Kind, kind)
	}
	if obj.APIVersion != "" && obj.APIVersion != guardedGroup+"/"+guardedVersion {
		return nil, inputErrorf("%s has apiVersion %s, expected %s/%s", field, obj.APIVersion, guardedGroup, guardedVersion)
	}
	return obj, nil
}

func webhooks(obj *webhookConfiguration) []policy.Webhook {
	if obj == nil {
		return nil
	}
	out := make([]policy.Webhook, len(obj.Webhooks))
	for i, w := range obj.Webhooks {
		out[i] = policy.Webhook{Name: w.Name, CABundle: w.ClientConfig.CABundle}
	}
	return out
}
