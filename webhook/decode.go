package webhook

import (
	"errors"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// admissionregistration.k8s.io/v1 is the group and version of the webhook
// configurations and of the policy shape's generated objects (ValidatingAdmission
// Policies and bindings); trustkinds.go lists the other kinds the handler
// decides. Every other kind or version is a misconfiguration, rejected with a
// 400, not something to allow.
const guardedGroup, guardedVersion = "admissionregistration.k8s.io", "v1"

// guardedObject holds only what the decision reads from a
// Validating- or MutatingWebhookConfiguration. Decoding into it is
// case-sensitive (sigs.k8s.io/json, as kube-apiserver decodes), and it skips
// everything else, so it costs a fraction of decoding the full typed object.
type guardedObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
		// UID and ResourceVersion identify the write (policy.WriteID).
		UID             string            `json:"uid"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
	Webhooks []struct {
		Name         string `json:"name"`
		ClientConfig struct {
			CABundle caBundle `json:"caBundle"`
			// URL and Service are where kube-apiserver calls the entry:
			// the serving check verifies what was served for the name it
			// derives from them (policy.Entry.Endpoint).
			URL     string      `json:"url"`
			Service *serviceRef `json:"service"`
		} `json:"clientConfig"`
	} `json:"webhooks"`
	// Spec is read for the kinds with one caBundle each (trustkinds.go):
	// a CustomResourceDefinition's conversion webhook, an APIService.
	Spec trustSpec `json:"spec"`
}

// InputError is a request the guard cannot decide because it is malformed.
// It is answered with a 400 and the request is rejected: an undecodable
// request is never allowed by accident.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// admissionReview is an AdmissionReview as the guard reads it: the request
// and the two objects in one pass, skipping every field the decision does
// not read.
//
// It is decoded with github.com/go-json-experiment/json, the module that
// mirrors encoding/json/v2 (an experiment in Go 1.25/1.26, the standard
// library's in Go 1.27). With its defaults it is at least as strict as
// kube-apiserver's own decoder (sigs.k8s.io/json): member names match
// case-sensitively ("Request", "UID" or "CABundle" are not read), and the
// whole input is validated, skipped members included. It is stricter in two
// ways kube-apiserver's reviews never meet: a duplicate member name and
// invalid UTF-8 are errors (answered 400, never allowed). It decodes a
// review in about a third of the time of encoding/json or sigs.k8s.io/json
// (`make bench`).
type admissionReview struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Request    *reviewRequest `json:"request"`
}

// reviewRequest is the part of an admission.k8s.io AdmissionRequest the
// decision reads, objects included.
type reviewRequest struct {
	UID       types.UID               `json:"uid"`
	Kind      metav1.GroupVersionKind `json:"kind"`
	Name      string                  `json:"name"`
	Operation admissionv1.Operation   `json:"operation"`
	UserInfo  struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"userInfo"`
	Object    *guardedObject `json:"object"`
	OldObject *guardedObject `json:"oldObject"`
	DryRun    *bool          `json:"dryRun"`
}

// decodeReview decodes an AdmissionReview body: the only decoder of the
// guard, whether the body came over HTTP or from `check`'s file. A review
// without a request decodes to an empty request, which input rejects.
func decodeReview(body []byte) (*admissionReview, error) {
	var review admissionReview
	if err := jsonv2.Unmarshal(body, &review); err != nil {
		return nil, decodeError(&review, err)
	}
	if review.Request == nil {
		review.Request = &reviewRequest{}
	}
	return &review, nil
}

// decodeError words a decode failure: a syntax error is a "json parse
// error", a type error inside an object says which object did not decode.
func decodeError(review *admissionReview, err error) error {
	if _, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		return fmt.Errorf("json parse error: %w", err)
	}
	var sem *jsonv2.SemanticError
	if errors.As(err, &sem) && review.Request != nil {
		for _, field := range []struct{ ptr, name string }{{"/request/object", fieldObject}, {"/request/oldObject", fieldOldObject}} {
			if p := string(sem.JSONPointer); p == field.ptr || strings.HasPrefix(p, field.ptr+"/") {
				return inputErrorf("%s does not decode as a %s: %v", field.name, review.Request.Kind.Kind, stableJSONError{err})
			}
		}
	}
	return fmt.Errorf("cannot decode the AdmissionReview: %w", stableJSONError{err})
}

// stableJSONError fixes the wording of a go-json-experiment error. The module
// words a semantic error "json: cannot ..." or "json: unable to ...", picked
// at random once per process so that callers do not depend on the text. The
// guard's answers must read the same in every process (check and the server
// agree, a denial a user searched for is found again), so the verb is fixed.
type stableJSONError struct{ err error }

func (e stableJSONError) Error() string {
	msg := e.err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unable to "); ok {
		return "json: cannot " + rest
	}
	return msg
}

func (e stableJSONError) Unwrap() error { return e.err }

const fieldObject, fieldOldObject = "request.object", "request.oldObject"

// isAdmissionPolicyObject reports whether the request is about one of
// the policy shape's generated kinds (a ValidatingAdmissionPolicy or binding).
func (r *reviewRequest) isAdmissionPolicyObject() bool {
	k := r.Kind
	return k.Group == guardedGroup && k.Version == guardedVersion && policy.GuardedKind(k.Kind).IsAdmissionPolicyObject()
}

// admissionPolicyObjectInput builds the decision's input for a write of a
// generated admission policy or binding; writer is the guard's username.
func (r *reviewRequest) admissionPolicyObjectInput(writer string) *policy.AdmissionPolicyObjectInput {
	return &policy.AdmissionPolicyObjectInput{
		Operation: policy.Operation(r.Operation),
		Kind:      policy.GuardedKind(r.Kind.Kind),
		Name:      r.Name,
		User:      policy.User{Username: r.UserInfo.Username, Groups: r.UserInfo.Groups},
		DryRun:    r.DryRun != nil && *r.DryRun,
		Generated: generatedByGuard(r.Object) || generatedByGuard(r.OldObject),
		Writer:    writer,
	}
}

// generatedByGuard reports whether a decoded object carries the policy shape's
// managed-by label (its metadata is all a policy object is read for).
func generatedByGuard(obj *guardedObject) bool {
	return obj != nil && obj.Metadata.Labels[vap.LabelManagedBy] == vap.ManagedBy
}

// input checks a webhook configuration request and builds the decision's
// input. The checks run in the order a reader of the error fixes them: the
// envelope, the user, the objects the operation reads, then their metadata.
func (r *reviewRequest) input() (*policy.Input, error) {
	kind, err := r.guardedKind()
	if err != nil {
		return nil, err
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
	obj, old, err := r.objects(kind)
	if err != nil {
		return nil, err
	}
	if err := setMetadata(in, obj, old); err != nil {
		return nil, err
	}
	in.Entries, in.OldEntries = webhooks(kind, obj), webhooks(kind, old)
	in.Write = writeID(in.Operation, obj, old)
	return in, nil
}

// guardedKind checks the request's envelope (there is a request, it has a
// uid, and its kind is one the guard decides on) and returns that kind.
func (r *reviewRequest) guardedKind() (policy.GuardedKind, error) {
	if r.UID == "" && r.Kind.Kind == "" && r.Operation == "" && r.UserInfo.Username == "" {
		return "", inputErrorf("the body holds no admission request: expected an admission.k8s.io/v1 AdmissionReview with a request")
	}
	if r.UID == "" {
		return "", inputErrorf("request.uid is missing")
	}
	kind := policy.GuardedKind(r.Kind.Kind)
	if gv, ok := guardedKinds[kind]; !ok || r.Kind.Group != gv.Group || r.Kind.Version != gv.Version {
		return "", inputErrorf("request.kind %s is not guarded: expected %s; check the rules of the webhook registration", r.Kind.String(), guardedKindList)
	}
	return kind, nil
}

// objects returns the request's object and old object, each checked when
// the operation reads it and nil when it does not.
func (r *reviewRequest) objects(kind policy.GuardedKind) (obj, old *guardedObject, err error) {
	switch policy.Operation(r.Operation) {
	case policy.OperationCreate:
		obj, err = checkObject(fieldObject, r.Object, kind)
	case policy.OperationUpdate:
		if obj, err = checkObject(fieldObject, r.Object, kind); err == nil {
			old, err = checkObject(fieldOldObject, r.OldObject, kind)
		}
	case policy.OperationDelete:
		old, err = checkObject(fieldOldObject, r.OldObject, kind)
	default:
		return nil, nil, inputErrorf("request.operation %q is not guarded: expected CREATE, UPDATE or DELETE", r.Operation)
	}
	if err != nil {
		return nil, nil, err
	}
	return obj, old, nil
}

// setMetadata fills the input's name, labels and annotations from the
// objects the operation reads (at least one of them is set).
func setMetadata(in *policy.Input, obj, old *guardedObject) error {
	meta := obj
	if meta == nil {
		meta = old
	}
	if in.Name == "" {
		in.Name = meta.Metadata.Name
	}
	if meta.Metadata.Name != "" && meta.Metadata.Name != in.Name {
		return inputErrorf("request.name %q does not match the object's metadata.name %q", in.Name, meta.Metadata.Name)
	}
	in.Labels, in.Annotations = meta.Metadata.Labels, meta.Metadata.Annotations
	if old != nil && in.Operation == policy.OperationUpdate {
		// The owning mapping (by label selector) and the CA source annotation
		// are read from the stored object, so a request can neither move the
		// configuration out of its owner's selector nor redirect its own CA
		// check by rewriting its labels or annotations.
		in.Labels, in.Annotations = old.Metadata.Labels, old.Metadata.Annotations
		// Relabelling into a selector mapping is decided by that mapping too.
		in.UpdatedLabels = meta.Metadata.Labels
		// A change of the CA pointer is decided as a trust change.
		in.UpdatedAnnotations = meta.Metadata.Annotations
		if in.UpdatedAnnotations == nil {
			in.UpdatedAnnotations = noAnnotations
		}
	}
	return nil
}

// noAnnotations is the annotations of an UPDATE whose object has none:
// non-nil, so that the decision sees them removed, and shared, as nothing
// writes to it.
var noAnnotations = map[string]string{}

// writeID names the write the records count: the stored object's version
// on an update, the new object on a create.
func writeID(op policy.Operation, obj, old *guardedObject) string {
	switch op {
	case policy.OperationCreate:
		return policy.WriteID(obj.Metadata.UID, "")
	case policy.OperationUpdate:
		return policy.WriteID(old.Metadata.UID, old.Metadata.ResourceVersion)
	case policy.OperationDelete:
		// A deletion stores no caBundle: no write for the records to count.
	}
	return ""
}

// checkObject checks a decoded request.object or request.oldObject (the
// operation reads it, so it must be there) against request.kind.
func checkObject(field string, obj *guardedObject, kind policy.GuardedKind) (*guardedObject, error) {
	if obj == nil {
		return nil, inputErrorf("%s is missing", field)
	}
	if obj.Kind != "" && obj.Kind != string(kind) {
		return nil, inputErrorf("%s is a %s, but request.kind says %s", field, obj.Kind, kind)
	}
	if gv := guardedKinds[kind]; obj.APIVersion != "" && obj.APIVersion != gv.String() {
		return nil, inputErrorf("%s has apiVersion %s, expected %s", field, obj.APIVersion, gv)
	}
	return obj, nil
}

// webhooks are the entries of the object whose caBundles kube-apiserver
// trusts: a webhook configuration's webhooks[], the one entry of a CRD's
// conversion webhook or an APIService, read by the kind's entry decoder
// (trustkinds.go), which guardedKind made sure it has.
func webhooks(kind policy.GuardedKind, obj *guardedObject) []policy.Entry {
	if obj == nil {
		return nil
	}
	return entryDecoders[kind](obj)
}

// webhookEntries are a webhook configuration's webhooks[].
func webhookEntries(obj *guardedObject) []policy.Entry {
	out := make([]policy.Entry, len(obj.Webhooks))
	for i, w := range obj.Webhooks {
		cc := &w.ClientConfig
		out[i] = policy.Entry{Name: w.Name, CABundle: cc.CABundle, Endpoint: cc.Service.endpoint(cc.URL)}
	}
	return out
}
