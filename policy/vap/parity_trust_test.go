package vap

import (
	"encoding/base64"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
)

// parityInject is the Certificate the injected mappings' objects point
// at: the pinned mapping's pin, and the pointer the guard resolved the
// unpinned mapping's CA from.
const parityInject = "app-system/serving"

// trustParityCases are the cases of the whole trust: the CA pointer
// (cainjector's annotations) and the endpoint, beside the caBundle.
func trustParityCases(writer, intruder user.Info, cur, foreign *testpki.CA) map[string]parityCase {
	pin := map[string]string{policy.AnnotationInjectCAFrom: parityInject}
	mine := map[string]string{policy.AnnotationInjectCAFrom: "app-system/mine"}
	bogus := map[string]string{policy.AnnotationInjectCAFrom: "nowhere/nothing"}
	svcA := policy.Endpoint{Namespace: "app-system", Name: "app-webhook", Path: "/convert", Port: 443}
	svcB := policy.Endpoint{Namespace: "app-system", Name: "other", Path: "/convert", Port: 443}
	portB := policy.Endpoint{Namespace: "app-system", Name: "app-webhook", Path: "/convert", Port: 8443}
	evil := policy.Endpoint{URL: "https://evil.example.com/convert"}
	apiA := policy.Endpoint{Namespace: "app-system", Name: "metrics", Port: 443}
	apiB := policy.Endpoint{Namespace: "app-system", Name: "other", Port: 443}
	conv := func(b []byte) []entry { return []entry{{policy.EntryConversion, b}} }
	svc := func(b []byte) []entry { return []entry{{policy.EntryService, b}} }
	vwc := func(op policy.Operation, config string, u user.Info, stored, written map[string]string, old, next []byte) parityCase {
		c := parityCase{op: op, config: config, user: u, annotations: stored, written: written,
			old: []entry{{"a.app.io", old}}, next: []entry{{"a.app.io", next}}}
		if op == policy.OperationCreate {
			c.annotations, c.written, c.old = written, nil, nil
		}
		return c
	}
	obj := func(kind policy.GuardedKind, op policy.Operation, name string, u user.Info, stored, written map[string]string, old, next []entry, oldEP, ep policy.Endpoint) parityCase {
		c := parityCase{op: op, kind: kind, config: name, user: u, annotations: stored, written: written, old: old, next: next, oldEndpoint: oldEP, endpoint: ep}
		if op == policy.OperationCreate {
			c.annotations, c.written, c.old = written, nil, nil
		}
		return c
	}
	upd, create := policy.OperationUpdate, policy.OperationCreate
	crd, api := policy.KindCRD, policy.KindAPIService

	cases := map[string]parityCase{
		// A writer re-points the CA (rule 2): two steps may not do what
		// one step (annotation and caBundle together) may not.
		"writer re-points inject-ca-from of an unpinned mapping":            vwc(upd, "injected", writer, pin, mine, cur.PEM, cur.PEM),
		"writer re-points inject-ca-from and writes the caBundle too":       vwc(upd, "injected", writer, pin, mine, cur.PEM, foreign.PEM),
		"writer removes inject-ca-from of an unpinned mapping":              vwc(upd, "injected", writer, pin, map[string]string{}, cur.PEM, cur.PEM),
		"writer re-points inject-ca-from off the pin":                       vwc(upd, "pinned", writer, pin, mine, cur.PEM, cur.PEM),
		"writer points inject-ca-from at the pin":                           vwc(upd, "pinned", writer, mine, pin, cur.PEM, cur.PEM),
		"writer keeps a pointer that is not the pin":                        vwc(upd, "pinned", writer, mine, mine, cur.PEM, cur.PEM),
		"writer creates a configuration pointing at its own CA under a pin": vwc(create, "pinned", writer, nil, mine, nil, cur.PEM),
		"writer creates a configuration pointing at its own CA, unpinned":   vwc(create, "injected", writer, nil, mine, nil, cur.PEM),
		"writer creates empty entries pointing at the pin":                  vwc(create, "pinned", writer, nil, pin, nil, nil),
		// A difference (docs/policy-shape.md): the policy knows only the
		// pointers its CA was resolved from at the last sync.
		"writer creates empty entries pointing at a Certificate the guard did not resolve, unpinned": vwc(create, "injected", writer, nil, mine, nil, nil),
		"writer re-points a CRD's inject-ca-from off the pin": obj(crd, upd, "widgets.example.com", writer, pin, mine,
			conv(cur.PEM), conv(cur.PEM), svcA, svcA),
		"writer moves a CRD's conversion webhook": obj(crd, upd, "gadgets.example.com", writer, nil, nil,
			conv(cur.PEM), conv(cur.PEM), svcA, evil),
		"writer switches a CRD's conversion to None": obj(crd, upd, "gadgets.example.com", writer, nil, nil,
			conv(cur.PEM), nil, svcA, policy.Endpoint{}),
		"non-writer switches a CRD's conversion to None": obj(crd, upd, "gadgets.example.com", intruder, nil, nil,
			conv(cur.PEM), nil, svcA, policy.Endpoint{}),

		// A non-writer moves the trust of a CRD or APIService (rule 1).
		"non-writer moves a CRD's conversion webhook to another Service": obj(crd, upd, "gadgets.example.com", intruder, nil, nil,
			conv(cur.PEM), conv(cur.PEM), svcA, svcB),
		"non-writer moves a CRD's conversion webhook to a URL": obj(crd, upd, "gadgets.example.com", intruder, nil, nil,
			conv(cur.PEM), conv(cur.PEM), svcA, evil),
		"non-writer changes the port of a CRD's conversion webhook": obj(crd, upd, "gadgets.example.com", intruder, nil, nil,
			conv(cur.PEM), conv(cur.PEM), svcA, portB),
		"non-writer moves an APIService to another Service": obj(api, upd, "v1.gadgets.example.com", intruder, nil, nil,
			svc(cur.PEM), svc(cur.PEM), apiA, apiB),
		"non-writer updates a CRD leaving its trust alone": obj(crd, upd, "gadgets.example.com", intruder, nil, nil,
			conv(cur.PEM), conv(cur.PEM), svcA, svcA),
		"non-writer updates an APIService leaving its trust alone": obj(api, upd, "v1.gadgets.example.com", intruder, nil, nil,
			svc(cur.PEM), svc(cur.PEM), apiA, apiA),
		"non-writer annotates a CRD with inject-ca-from": obj(crd, upd, "gadgets.example.com", intruder, nil, mine,
			conv(cur.PEM), conv(cur.PEM), svcA, svcA),
		"non-writer switches a CRD to a URL webhook without a caBundle under a bogus annotation": obj(crd, upd, "widgets.example.com", intruder, nil, bogus,
			nil, conv(nil), policy.Endpoint{}, evil),
		"non-writer re-points a pinned CRD": obj(crd, upd, "widgets.example.com", intruder, pin, mine,
			conv(cur.PEM), conv(cur.PEM), svcA, svcA),
		"non-writer creates a CRD pointing at the pin with an empty conversion webhook": obj(crd, create, "widgets.example.com", intruder, nil, pin,
			nil, conv(nil), policy.Endpoint{}, svcA),
		"non-writer creates a CRD pointing at its own CA with an empty conversion webhook": obj(crd, create, "widgets.example.com", intruder, nil, mine,
			nil, conv(nil), policy.Endpoint{}, svcA),
		"non-writer creates an APIService pointing at the pin with an empty caBundle": obj(api, create, "v1.widgets.example.com", intruder, nil, pin,
			nil, svc(nil), policy.Endpoint{}, apiA),
		"non-writer creates a CRD with no conversion webhook": obj(crd, create, "gadgets.example.com", intruder, nil, nil,
			nil, nil, policy.Endpoint{}, policy.Endpoint{}),
	}
	// The fill exception: only for a pointer whose CA can be read.
	bogusCreate := vwc(create, "injected", writer, nil, bogus, nil, nil)
	bogusCreate.staticCAErr = "Certificate nowhere/nothing: not found"
	maps.Copy(cases, map[string]parityCase{
		"writer creates empty entries under a bogus inject-ca-from": bogusCreate,
	})
	return cases
}

// parityObjectOf is an object of kind as CEL sees it: a webhook
// configuration (parityObject), or a CRD or APIService whose one entry, if
// any, sends its traffic to endpoint.
func parityObjectOf(kind policy.GuardedKind, name string, annotations map[string]string, es []entry, endpoint policy.Endpoint) *unstructured.Unstructured {
	if kind != policy.KindCRD && kind != policy.KindAPIService {
		return parityObject(name, annotations, es)
	}
	meta := map[string]any{"name": name}
	if len(annotations) > 0 {
		a := map[string]any{}
		for k, v := range annotations {
			a[k] = v
		}
		meta["annotations"] = a
	}
	service := func(withPath bool) map[string]any {
		s := map[string]any{"namespace": endpoint.Namespace, "name": endpoint.Name, "port": int64(endpoint.Port)}
		if withPath && endpoint.Path != "" {
			s["path"] = endpoint.Path
		}
		return s
	}
	if kind == policy.KindAPIService {
		spec := map[string]any{"group": "example.com", "version": "v1", "groupPriorityMinimum": int64(100), "versionPriority": int64(10)}
		if len(es) > 0 {
			spec["service"] = service(false)
			if len(es[0].bundle) > 0 {
				spec["caBundle"] = base64.StdEncoding.EncodeToString(es[0].bundle)
			}
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": meta, "spec": spec}}
	}
	conversion := map[string]any{"strategy": "None"}
	if len(es) > 0 {
		cc := map[string]any{}
		if endpoint.URL != "" {
			cc["url"] = endpoint.URL
		} else {
			cc["service"] = service(true)
		}
		if len(es[0].bundle) > 0 {
			cc["caBundle"] = base64.StdEncoding.EncodeToString(es[0].bundle)
		}
		conversion = map[string]any{"strategy": "Webhook", "webhook": map[string]any{"clientConfig": cc, "conversionReviewVersions": []any{"v1"}}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": meta,
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced", "conversion": conversion},
	}}
}
