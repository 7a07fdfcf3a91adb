package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/webhook-guard/webhook-guard/policy"
)

// decodeInput runs the guard's decoder (decodeReview, then input) on req,
// encoded as kube-apiserver sends it, with request.object and
// request.oldObject spliced in byte for byte (they may be broken on purpose).
func decodeInput(t *testing.T, req *admissionv1.AdmissionRequest) (*policy.Input, error) {
	t.Helper()
	r := *req
	objects := map[string][]byte{}
	for placeholder, raw := range map[string]*runtime.RawExtension{`"@object"`: &r.Object, `"@oldObject"`: &r.OldObject} {
		if raw.Raw != nil {
			objects[placeholder], raw.Raw = raw.Raw, []byte(placeholder)
		}
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &r,
	})
	require.NoError(t, err)
	for placeholder, raw := range objects {
		body = bytes.Replace(body, []byte(placeholder), raw, 1)
	}
	review, err := decodeReview(body)
	if err != nil {
		return nil, err
	}
	return review.Request.input()
}

// The write identity (policy.WriteID) of the fixture's objects: a creation
// replaces nothing; an update replaces the stored object's resourceVersion.
const (
	writeCreated = "0c1b8d3c-0000-4000-8000-000000000001/"
	writeUpdated = "0c1b8d3c-0000-4000-8000-000000000001/42"
)

func Test_decodeInput(t *testing.T) {
	f := testFixtures(t)
	groups := []string{"system:authenticated"}
	koord := object{
		Name:        "koord",
		Labels:      map[string]string{"app": "koord"},
		Annotations: map[string]string{"cert-manager.io/inject-ca-from": "koordinator-system/webhook"},
		Bundles:     [][]byte{f.Owner.PEM, nil},
	}
	koordRotated := object{
		Name:        "koord",
		Labels:      map[string]string{"app": "koord-new"},
		Annotations: map[string]string{"cert-manager.io/inject-ca-from": "intruder-system/mine"},
		Bundles:     [][]byte{slices.Concat(f.Owner.PEM, f.OwnerNew.PEM), f.OwnerNew.PEM},
	}
	// raw builds a request whose object is the given JSON.
	raw := func(t *testing.T, op admissionv1.Operation, objJSON string) *admissionv1.AdmissionRequest {
		req := request(t, op, policy.KindValidating, koordManager, &object{Name: "koord"}, nil)
		req.Object = runtime.RawExtension{Raw: []byte(objJSON)}
		return req
	}
	b64 := base64.StdEncoding.EncodeToString(f.Owner.PEM)

	tests := map[string]struct {
		req    func(t *testing.T) *admissionv1.AdmissionRequest
		exp    *policy.Input
		expErr string
	}{
		"if request.uid is missing, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindValidating, koordManager, &koord, nil)
				req.UID = ""
				return req
			},
			expErr: "request.uid is missing",
		},
		"if request.kind is of another group and version, return an input error naming it": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindValidating, koordManager, &koord, nil)
				req.Kind = metav1.GroupVersionKind{Group: "", Version: "v1", Kind: "Pod"}
				return req
			},
			expErr: "request.kind /v1, Kind=Pod is not guarded: expected admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration, admissionregistration.k8s.io/v1 MutatingWebhookConfiguration, apiextensions.k8s.io/v1 CustomResourceDefinition, apiregistration.k8s.io/v1 APIService; check the rules of the webhook registration",
		},
		"if request.kind is an older version of a guarded kind, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindValidating, koordManager, &koord, nil)
				req.Kind.Version = "v1beta1"
				return req
			},
			expErr: "request.kind admissionregistration.k8s.io/v1beta1, Kind=ValidatingWebhookConfiguration is not guarded: expected admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration, admissionregistration.k8s.io/v1 MutatingWebhookConfiguration, apiextensions.k8s.io/v1 CustomResourceDefinition, apiregistration.k8s.io/v1 APIService; check the rules of the webhook registration",
		},
		"if request.kind is another kind of the guarded group, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindValidating, koordManager, &koord, nil)
				req.Kind.Kind = "ValidatingAdmissionPolicy"
				return req
			},
			expErr: "request.kind admissionregistration.k8s.io/v1, Kind=ValidatingAdmissionPolicy is not guarded: expected admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration, admissionregistration.k8s.io/v1 MutatingWebhookConfiguration, apiextensions.k8s.io/v1 CustomResourceDefinition, apiregistration.k8s.io/v1 APIService; check the rules of the webhook registration",
		},
		"if request.kind differs only in case, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindValidating, koordManager, &koord, nil)
				req.Kind.Kind = "validatingwebhookconfiguration"
				return req
			},
			expErr: "request.kind admissionregistration.k8s.io/v1, Kind=validatingwebhookconfiguration is not guarded: expected admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration, admissionregistration.k8s.io/v1 MutatingWebhookConfiguration, apiextensions.k8s.io/v1 CustomResourceDefinition, apiregistration.k8s.io/v1 APIService; check the rules of the webhook registration",
		},
		"if request.userInfo.username is missing, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Create, policy.KindValidating, "", &koord, nil)
			},
			expErr: "request.userInfo.username is missing",
		},
		"if the operation is CONNECT, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Connect, policy.KindValidating, koordManager, &koord, nil)
			},
			expErr: `request.operation "CONNECT" is not guarded: expected CREATE, UPDATE or DELETE`,
		},
		"if the operation is empty, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, "", policy.KindValidating, koordManager, &koord, nil)
			},
			expErr: `request.operation "" is not guarded: expected CREATE, UPDATE or DELETE`,
		},
		"if request.object is missing on CREATE, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindValidating, koordManager, nil, nil)
				req.Name = "koord"
				return req
			},
			expErr: "request.object is missing",
		},
		"if request.object is missing on UPDATE, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindMutating, koordManager, nil, &koord)
			},
			expErr: "request.object is missing",
		},
		"if request.oldObject is missing on UPDATE, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindMutating, koordManager, &koord, nil)
			},
			expErr: "request.oldObject is missing",
		},
		"if request.oldObject is missing on DELETE, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Delete, policy.KindValidating, koordManager, nil, nil)
				req.Name = "koord"
				return req
			},
			expErr: "request.oldObject is missing",
		},
		"if request.object does not decode (webhooks is a string), return an input error naming the field": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return raw(t, admissionv1.Create, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"koord"},"webhooks":"koord"}`)
			},
			expErr: `request.object does not decode as a ValidatingWebhookConfiguration: json: cannot unmarshal JSON string into Go slice within "/request/object/webhooks"`,
		},
		"if request.object is not JSON, the review does not parse: say where": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return raw(t, admissionv1.Create, `{"metadata":`)
			},
			expErr: `json parse error: jsontext: invalid character ',' at start of value within "/request/object/metadata" after offset 504`,
		},
		"if request.oldObject's caBundle is not base64, return an input error naming oldObject": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Update, policy.KindValidating, koordManager, &koord, &koord)
				req.OldObject = runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"koord"},"webhooks":[{"name":"a","clientConfig":{"caBundle":"not base64!"}}]}`)}
				return req
			},
			expErr: `request.oldObject does not decode as a ValidatingWebhookConfiguration: json: cannot unmarshal JSON string into Go []uint8 within "/request/oldObject/webhooks/0/clientConfig/caBundle": illegal base64 data at input byte 3`,
		},
		"if the object's kind differs from request.kind, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindValidating, koordManager, &koord, nil)
				req.Object = runtime.RawExtension{Raw: koord.encode(t, policy.KindMutating)}
				return req
			},
			expErr: "request.object is a MutatingWebhookConfiguration, but request.kind says ValidatingWebhookConfiguration",
		},
		"if the old object's kind differs from request.kind, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Delete, policy.KindMutating, koordManager, nil, &koord)
				req.OldObject = runtime.RawExtension{Raw: koord.encode(t, policy.KindValidating)}
				return req
			},
			expErr: "request.oldObject is a ValidatingWebhookConfiguration, but request.kind says MutatingWebhookConfiguration",
		},
		"if the object has another apiVersion, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return raw(t, admissionv1.Create, `{"apiVersion":"admissionregistration.k8s.io/v1beta1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"koord"}}`)
			},
			expErr: "request.object has apiVersion admissionregistration.k8s.io/v1beta1, expected admissionregistration.k8s.io/v1",
		},
		"if request.name differs from metadata.name, return an input error": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Update, policy.KindValidating, koordManager, &koord, &koord)
				req.Name = "other"
				return req
			},
			expErr: `request.name "other" does not match the object's metadata.name "koord"`,
		},

		"if a ValidatingWebhookConfiguration is created, return its name, labels, annotations, subject and base64-decoded caBundles": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Create, policy.KindValidating, koordManager, &koord, nil)
			},
			exp: &policy.Input{
				Write:       writeCreated,
				Operation:   policy.OperationCreate,
				Kind:        policy.KindValidating,
				Name:        "koord",
				Labels:      koord.Labels,
				Annotations: koord.Annotations,
				User:        policy.User{Username: koordManager, Groups: groups},
				Entries:     koord.webhooks(),
			},
		},
		"if a MutatingWebhookConfiguration is created as a dry run, return DryRun": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindMutating, intruder, &koord, nil)
				req.DryRun = new(true)
				return req
			},
			exp: &policy.Input{
				Write:       writeCreated,
				Operation:   policy.OperationCreate,
				Kind:        policy.KindMutating,
				Name:        "koord",
				Labels:      koord.Labels,
				Annotations: koord.Annotations,
				User:        policy.User{Username: intruder, Groups: groups},
				DryRun:      true,
				Entries:     koord.webhooks(),
			},
		},
		"if dryRun is false, return DryRun false": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindMutating, intruder, &koord, nil)
				req.DryRun = new(false)
				return req
			},
			exp: &policy.Input{
				Write:       writeCreated,
				Operation:   policy.OperationCreate,
				Kind:        policy.KindMutating,
				Name:        "koord",
				Labels:      koord.Labels,
				Annotations: koord.Annotations,
				User:        policy.User{Username: intruder, Groups: groups},
				Entries:     koord.webhooks(),
			},
		},
		"if a ValidatingWebhookConfiguration is updated, return both webhooks lists, with labels and annotations of the stored (old) object and the labels it writes": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindValidating, intruder, &koordRotated, &koord)
			},
			exp: &policy.Input{
				Write:         writeUpdated,
				Operation:     policy.OperationUpdate,
				Kind:          policy.KindValidating,
				Name:          "koord",
				Labels:        koord.Labels,
				UpdatedLabels: koordRotated.Labels,
				Annotations:   koord.Annotations,
				// The annotations it writes, where a change of the CA
				// pointer is decided.
				UpdatedAnnotations: koordRotated.Annotations,
				User:               policy.User{Username: intruder, Groups: groups},
				Entries:            koordRotated.webhooks(),
				OldEntries:         koord.webhooks(),
			},
		},
		"if a MutatingWebhookConfiguration is updated, return both webhooks lists, with labels and annotations of the stored (old) object and the labels it writes": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Update, policy.KindMutating, koordManager, &koordRotated, &koord)
			},
			exp: &policy.Input{
				Write:         writeUpdated,
				Operation:     policy.OperationUpdate,
				Kind:          policy.KindMutating,
				Name:          "koord",
				Labels:        koord.Labels,
				UpdatedLabels: koordRotated.Labels,
				Annotations:   koord.Annotations,
				// The annotations it writes, where a change of the CA
				// pointer is decided.
				UpdatedAnnotations: koordRotated.Annotations,
				User:               policy.User{Username: koordManager, Groups: groups},
				Entries:            koordRotated.webhooks(),
				OldEntries:         koord.webhooks(),
			},
		},
		"if a ValidatingWebhookConfiguration is deleted, return the old object's webhooks, labels and annotations and no new webhooks": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Delete, policy.KindValidating, intruder, nil, &koordRotated)
			},
			exp: &policy.Input{
				Operation:   policy.OperationDelete,
				Kind:        policy.KindValidating,
				Name:        "koord",
				Labels:      koordRotated.Labels,
				Annotations: koordRotated.Annotations,
				User:        policy.User{Username: intruder, Groups: groups},
				OldEntries:  koordRotated.webhooks(),
			},
		},
		"if a MutatingWebhookConfiguration is deleted, return the old object's webhooks": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return request(t, admissionv1.Delete, policy.KindMutating, intruder, nil, &koord)
			},
			exp: &policy.Input{
				Operation:   policy.OperationDelete,
				Kind:        policy.KindMutating,
				Name:        "koord",
				Labels:      koord.Labels,
				Annotations: koord.Annotations,
				User:        policy.User{Username: intruder, Groups: groups},
				OldEntries:  koord.webhooks(),
			},
		},
		"if request.name is empty, take the name from metadata.name": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := request(t, admissionv1.Create, policy.KindValidating, koordManager, &koord, nil)
				req.Name = ""
				return req
			},
			exp: &policy.Input{
				Write:       writeCreated,
				Operation:   policy.OperationCreate,
				Kind:        policy.KindValidating,
				Name:        "koord",
				Labels:      koord.Labels,
				Annotations: koord.Annotations,
				User:        policy.User{Username: koordManager, Groups: groups},
				Entries:     koord.webhooks(),
			},
		},
		"if the object has no apiVersion, kind or metadata.name, take the request's": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return raw(t, admissionv1.Create, `{"webhooks":[{"name":"a","clientConfig":{"caBundle":"`+b64+`"}}]}`)
			},
			exp: &policy.Input{
				Operation: policy.OperationCreate,
				Kind:      policy.KindValidating,
				Name:      "koord",
				User:      policy.User{Username: koordManager, Groups: groups},
				Entries:   []policy.Entry{{Name: "a", CABundle: f.Owner.PEM}},
			},
		},
		"if the webhooks call a URL and a Service, return each endpoint (the serving check verifies for its name)": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return raw(t, admissionv1.Create, `{"webhooks":[{"name":"a","clientConfig":{"url":"https://hook.example.com/validate"}},`+
					`{"name":"b","clientConfig":{"service":{"namespace":"app","name":"hook","path":"/validate","port":8443}}}]}`)
			},
			exp: &policy.Input{
				Operation: policy.OperationCreate,
				Kind:      policy.KindValidating,
				Name:      "koord",
				User:      policy.User{Username: koordManager, Groups: groups},
				Entries: []policy.Entry{{Name: "a", Endpoint: policy.Endpoint{URL: "https://hook.example.com/validate"}},
					{Name: "b", Endpoint: policy.Endpoint{Namespace: "app", Name: "hook", Path: "/validate", Port: 8443}}},
			},
		},
		"if a field is spelled Webhooks, do not read it: decoding is case-sensitive as in kube-apiserver": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return raw(t, admissionv1.Create, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"koord"},"Webhooks":[{"name":"a","clientConfig":{"caBundle":"`+b64+`"}}]}`)
			},
			exp: &policy.Input{
				Operation: policy.OperationCreate,
				Kind:      policy.KindValidating,
				Name:      "koord",
				User:      policy.User{Username: koordManager, Groups: groups},
				Entries:   []policy.Entry{},
			},
		},
		"if a field is spelled CaBundle, do not read it: decoding is case-sensitive as in kube-apiserver": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return raw(t, admissionv1.Create, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"koord"},"webhooks":[{"name":"a","clientConfig":{"CaBundle":"`+b64+`"}}]}`)
			},
			exp: &policy.Input{
				Operation: policy.OperationCreate,
				Kind:      policy.KindValidating,
				Name:      "koord",
				User:      policy.User{Username: koordManager, Groups: groups},
				Entries:   []policy.Entry{{Name: "a"}},
			},
		},
		"if metadata and Kind are spelled in another case, do not read them": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return raw(t, admissionv1.Create, `{"Kind":"MutatingWebhookConfiguration","Metadata":{"name":"other","labels":{"team":"a"}},"webhooks":[]}`)
			},
			exp: &policy.Input{
				Operation: policy.OperationCreate,
				Kind:      policy.KindValidating,
				Name:      "koord",
				User:      policy.User{Username: koordManager, Groups: groups},
				Entries:   []policy.Entry{},
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			in, err := decodeInput(t, test.req(t))
			if test.expErr != "" {
				require.EqualError(t, err, test.expErr)
				if !strings.HasPrefix(test.expErr, "json parse error: ") {
					assert.True(t, IsInputError(err), "the error is an InputError")
				}
				assert.Nil(t, in)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, test.exp, in)
		})
	}
}

func Test_IsInputError(t *testing.T) {
	tests := map[string]struct {
		err error
		exp bool
	}{
		"if the error is an InputError, return true":                      {err: inputErrorf("request.uid is missing"), exp: true},
		"if the error wraps an InputError, return true":                   {err: wrapped{inputErrorf("x")}, exp: true},
		"if the error is another error, return false":                     {err: assert.AnError, exp: false},
		"if there is no error, return false":                              {err: nil, exp: false},
		"if the error only carries an InputError's message, return false": {err: stringError("request.uid is missing"), exp: false},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, IsInputError(test.err))
		})
	}
}

type wrapped struct{ err error }

func (w wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

type stringError string

func (e stringError) Error() string { return string(e) }

func Test_stableJSONError(t *testing.T) {
	cases := map[string]struct {
		msg, exp string
	}{
		"if the module chose 'unable to', say 'cannot'": {
			msg: `json: unable to unmarshal JSON string into Go slice within "/request/object/webhooks"`,
			exp: `json: cannot unmarshal JSON string into Go slice within "/request/object/webhooks"`,
		},
		"if the module chose 'cannot', keep it": {
			msg: `json: cannot unmarshal JSON string into Go slice within "/request/object/webhooks"`,
			exp: `json: cannot unmarshal JSON string into Go slice within "/request/object/webhooks"`,
		},
		"if 'unable to' is not the verb, leave the message alone": {
			msg: `json: cannot unmarshal: unable to parse`,
			exp: `json: cannot unmarshal: unable to parse`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inner := errors.New(tc.msg)
			err := stableJSONError{inner}
			assert.Equal(t, tc.exp, err.Error())
			assert.ErrorIs(t, err, inner)
		})
	}
}
