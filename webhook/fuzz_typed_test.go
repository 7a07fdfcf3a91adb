package webhook

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// FuzzTypedReview is differential: it builds reviews the way kube-apiserver
// encodes them (typed admission/v1 and admissionregistration/v1 objects
// marshalled to JSON) from fuzzed users, groups, labels, annotations,
// entries and bundles, sends them through the production path (Handler.ServeHTTP:
// decode, CA resolution, decision, encoding), and compares the answer with
// the decision on the typed input itself (no JSON decoding): the same
// verdict, the same rule, the same message.
func FuzzTypedReview(f *testing.F) {
	fx := testFixtures(f)
	cfg := mustLoad(f, guardConfigDoc(fx))
	s, err := NewScheme()
	if err != nil {
		f.Fatal(err)
	}
	var objs []runtime.Object
	for _, ns := range []struct{ ns, name string }{{"koordinator-system", "webhook-certs"}, {"audited-system", "ca"}, {"team-a", "ca"}} {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.ns, Name: ns.name}, Data: map[string][]byte{"ca.crt": fx.Owner.PEM}})
	}
	ownerSet, err := cabundle.NewCASet("", fx.Owner.PEM)
	if err != nil {
		f.Fatal(err)
	}
	h := newHandler(f, HandlerOptions{
		Config:   StaticConfig{Config: cfg},
		CA:       casource.New(fake.NewClientBuilder().WithScheme(s).WithRuntimeObjects(objs...).Build(), casource.Options{}),
		Metrics:  NewMetrics(prometheus.NewRegistry()),
		Recorder: LogRecorder{Log: logr.Discard()},
		Log:      logr.Discard(),
	})

	headered := func(p []byte) []byte {
		b, _ := pem.Decode(p)
		b.Headers = map[string]string{"Proc-Type": "4,ENCRYPTED"}
		return pem.EncodeToMemory(b)
	}
	// The bundles an entry may carry, chosen by two bits each.
	bundles := [][]byte{nil, fx.Owner.PEM, fx.Foreign.PEM, headered(fx.Owner.PEM), []byte("not pem"), slices.Concat(fx.Owner.PEM, fx.Foreign.PEM)}
	names := []string{"koord", "audited", "legacy", "team-a-hooks"}
	users := []string{koordManager, auditedOwner, teamAOwner, intruder, "legacy-operator", "kubernetes-admin"}

	f.Add(uint8(1), false, uint8(0), uint8(0), "", "", "", "", uint16(0x11), uint16(0x11), uint8(2), false, false)
	f.Add(uint8(1), true, uint8(3), uint8(3), "system:masters", "team", "a", "", uint16(0x22), uint16(0x11), uint8(1), true, false)
	f.Add(uint8(0), false, uint8(3), uint8(2), "", "", "", "a", uint16(0x3), uint16(0), uint8(3), false, true)
	f.Add(uint8(2), false, uint8(0), uint8(3), "", "", "", "", uint16(0), uint16(0x11), uint8(2), false, false)
	f.Fuzz(func(t *testing.T, op uint8, mutating bool, nameSel, userSel uint8, group, labelKey, newLabel, oldLabel string,
		newSel, oldSel uint16, entries uint8, rename, dryRun bool) {
		kind := policy.KindValidating
		if mutating {
			kind = policy.KindMutating
		}
		operation := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}[op%3]
		name := names[int(nameSel)%len(names)]
		if labelKey == "" || !validLabel(labelKey) || !validLabel(newLabel) || !validLabel(oldLabel) {
			labelKey = "team"
		}
		build := func(sel uint16, label string, prefix string) *object {
			o := &object{Name: name, Annotations: map[string]string{casource.AnnotationInjectCAFrom: "ns/" + prefix}}
			if label != "" {
				o.Labels = map[string]string{labelKey: label}
			}
			for i := range int(entries % 4) {
				o.Bundles = append(o.Bundles, bundles[int(sel>>(4*i)&0xf)%len(bundles)])
			}
			return o
		}
		next, old := build(newSel, newLabel, "new"), build(oldSel, oldLabel, "old")
		req := &admissionv1.AdmissionRequest{}
		switch operation {
		case admissionv1.Create:
			req = request(t, operation, kind, users[int(userSel)%len(users)], next, nil)
		case admissionv1.Update:
			req = request(t, operation, kind, users[int(userSel)%len(users)], next, old)
			if rename && len(next.Bundles) > 0 {
				raw := bytes.Replace(req.Object.Raw, []byte(next.webhookName(0)), []byte("renamed.example.com"), 1)
				req.Object = runtime.RawExtension{Raw: raw}
			}
		case admissionv1.Delete:
			req = request(t, operation, kind, users[int(userSel)%len(users)], nil, old)
		case admissionv1.Connect:
			t.Fatalf("operation %s is never generated", operation)
		}
		req.UserInfo = authenticationv1.UserInfo{Username: req.UserInfo.Username, Groups: append([]string{"system:authenticated"}, group)}
		req.DryRun = &dryRun

		// The decision on the typed input.
		in := policy.Input{Operation: policy.Operation(operation), Kind: kind, Name: name, DryRun: dryRun,
			User: policy.User{Username: req.UserInfo.Username, Groups: req.UserInfo.Groups}}
		switch operation {
		case admissionv1.Create:
			in.Labels, in.Annotations, in.Entries = next.Labels, next.Annotations, next.webhooks()
		case admissionv1.Update:
			in.Labels, in.Annotations, in.UpdatedLabels = old.Labels, old.Annotations, next.Labels
			in.Entries, in.OldEntries = next.webhooks(), old.webhooks()
			if rename && len(in.Entries) > 0 {
				in.Entries[0].Name = "renamed.example.com"
			}
		case admissionv1.Delete:
			in.Labels, in.Annotations, in.OldEntries = old.Labels, old.Annotations, old.webhooks()
		case admissionv1.Connect:
			t.Fatalf("operation %s is never generated", operation)
		}
		exp := cfg.Evaluate(&in, policy.Env{CA: fixedCA{ownerSet}})

		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  req,
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		hreq := httptest.NewRequestWithContext(t.Context(), http.MethodPost, Path, bytes.NewReader(body))
		hreq.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, hreq)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("the answer is not an AdmissionReview with a response (%v): %s", err, rec.Body.String())
		}
		got := out.Response
		if got.Allowed != exp.Allowed() {
			t.Fatalf("production path allowed=%v, the typed input's decision allowed=%v (%s %s by %s): %s / %s",
				got.Allowed, exp.Allowed(), operation, name, in.User.Username, resultMessage(got), exp.Message())
		}
		if expRule := exp.AuditAnnotations()["rule"]; got.AuditAnnotations["rule"] != expRule {
			t.Fatalf("production path rule %q, the typed input's %q", got.AuditAnnotations["rule"], expRule)
		}
		if !exp.Allowed() && resultMessage(got) != exp.Message() {
			t.Fatalf("denial messages differ:\nproduction: %s\ntyped:      %s", resultMessage(got), exp.Message())
		}
	})
}

func resultMessage(r *admissionv1.AdmissionResponse) string {
	if r.Result == nil {
		return ""
	}
	return r.Result.Message
}

// validLabel keeps fuzzed label keys and values to what kube-apiserver
// stores (it rejects invalid labels before admission webhooks run).
func validLabel(s string) bool {
	if len(s) > 63 {
		return false
	}
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || i == len(s)-1 || (r != '-' && r != '_' && r != '.')) {
			return false
		}
	}
	return true
}

func secretOf(o *guardapi.Owner) string {
	if o.CA.Secret == nil {
		return ""
	}
	return o.CA.Secret.Namespace + "/" + o.CA.Secret.Name
}

// fixedCA answers every owner's CA with one set, named after the owner's
// Secret as the resolver names it.
type fixedCA struct{ set cabundle.CASet }

func (f fixedCA) LookupCA(q policy.CAQuery) policy.CAAnswer {
	set := f.set
	set.Source = "Secret " + secretOf(q.Owner) + " (key ca.crt)"
	return policy.CAAnswer{CAResult: policy.CAResult{Set: set, Resolved: true}}
}
