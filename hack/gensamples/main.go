// Command gensamples writes config/samples: CA certificates, the objects
// they live in, and AdmissionReviews for the incident cases. It is run by
// hand (go run ./hack/gensamples) when the samples change; its output is
// committed and `check`'s golden tests run over it.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// newCA is a CA in PEM valid for a century from a fixed date, so that the
// committed samples never expire under the golden tests.
func newCA(cn string) string {
	ca, err := testpki.NewCA(cn, testpki.WithValidity(
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2126, 1, 1, 0, 0, 0, 0, time.UTC)))
	must(err)
	return string(ca.PEM)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

type hook struct{ name, ca string }

func config(kind, name string, annotations map[string]string, hooks ...hook) map[string]any {
	var ws []any
	for _, h := range hooks {
		cc := map[string]any{"url": "https://koord-webhook.example.internal:9876/" + h.name}
		if h.ca != "" {
			cc["caBundle"] = base64.StdEncoding.EncodeToString([]byte(h.ca))
		}
		ws = append(ws, map[string]any{
			"name": h.name, "clientConfig": cc, "admissionReviewVersions": []string{"v1"}, "sideEffects": "None",
		})
	}
	md := map[string]any{"name": name}
	if annotations != nil {
		md["annotations"] = annotations
	}
	return map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": md, "webhooks": ws}
}

func review(uid, op, kind, name, user string, groups []string, obj, old map[string]any, dryRun bool) map[string]any {
	req := map[string]any{
		"uid":       uid,
		"kind":      map[string]any{"group": "admissionregistration.k8s.io", "version": "v1", "kind": kind},
		"resource":  map[string]any{"group": "admissionregistration.k8s.io", "version": "v1", "resource": strings.ToLower(kind) + "s"},
		"name":      name,
		"operation": op,
		"userInfo":  map[string]any{"username": user, "groups": groups},
		"dryRun":    dryRun,
	}
	if obj != nil {
		req["object"] = obj
	}
	if old != nil {
		req["oldObject"] = old
	}
	return map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
}

func write(dir, name string, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	must(err)
	must(os.WriteFile(filepath.Join(dir, name), append(data, '\n'), 0o644))
}

func indent(s, pad string) string {
	return pad + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+pad)
}

func main() {
	dir := "config/samples"
	reviews := filepath.Join(dir, "reviews")
	must(os.MkdirAll(reviews, 0o755))
	c := cas{owner: newCA("koordinator-webhook-ca"), next: newCA("koordinator-webhook-ca-next"), foreign: newCA("replica-7-self-signed-ca"), istio: newCA("istio-webhook-ca")}
	objects := fmt.Sprintf(objectsTemplate, indent(c.owner, "    "), indent(c.next, "    "), indent(c.istio, "    "))
	must(os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(objects), 0o644))
	writeReviews(reviews, c)
}

// cas are the samples' CAs, in PEM: the owner's, its next one, a foreign
// one and istiod's.
type cas struct{ owner, next, foreign, istio string }

// objectsTemplate is objects.yaml, given the owner's, next and istiod's CA.
const objectsTemplate = `# Objects the sample GuardConfigs' CA sources resolve against:
# webhook-guard check --config config/samples/guard-koordinator.yaml \
#   --objects config/samples/objects.yaml --review config/samples/reviews/owner.json
# The koordinator Secret is mid-rotation: ca.crt holds the current and the next CA.
apiVersion: v1
kind: Secret
metadata:
  name: webhook-certs
  namespace: koordinator-system
type: kubernetes.io/tls
stringData:
  tls.crt: ""
  tls.key: ""
  ca.crt: |
%s
%s
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: istiod-webhook
  namespace: istio-system
spec:
  secretName: istiod-webhook-tls
  dnsNames: [istiod.istio-system.svc]
  issuerRef: {name: istio-ca, kind: Issuer}
---
apiVersion: v1
kind: Secret
metadata:
  name: istiod-webhook-tls
  namespace: istio-system
type: kubernetes.io/tls
stringData:
  tls.crt: ""
  tls.key: ""
  ca.crt: |
%s
---
# Garbage where a CA should be: check exits 2 naming this Secret.
apiVersion: v1
kind: Secret
metadata:
  name: broken-ca
  namespace: broken
stringData:
  ca.crt: "this is not a certificate"
`

// writeReviews writes the sample AdmissionReviews into dir.
func writeReviews(reviews string, c cas) {
	owner, next, foreign, istio := c.owner, c.next, c.foreign, c.istio
	const (
		vwc, mwc = "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"
		koordV   = "koord-validating-webhook-configuration"
		koordM   = "koord-mutating-webhook-configuration"
		manager  = "system:serviceaccount:koordinator-system:koord-manager"
		intruder = "system:serviceaccount:kube-system:legacy-cert-controller"
	)
	saGroups := func(ns string) []string {
		return []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	oldV := config(vwc, koordV, nil, hook{"vpod.koordinator.sh", owner}, hook{"vnode.koordinator.sh", owner})
	oldM := config(mwc, koordM, nil, hook{"mpod.koordinator.sh", owner})

	write(reviews, "owner.json", review("0b5e8c1e-0001-4c1e-9d7e-000000000001", "UPDATE", vwc, koordV, manager, saGroups("koordinator-system"),
		config(vwc, koordV, nil, hook{"vpod.koordinator.sh", owner}, hook{"vnode.koordinator.sh", owner}), oldV, false))
	write(reviews, "intruder.json", review("0b5e8c1e-0002-4c1e-9d7e-000000000002", "UPDATE", mwc, koordM, intruder, saGroups("kube-system"),
		config(mwc, koordM, nil, hook{"mpod.koordinator.sh", owner}), oldM, false))
	write(reviews, "foreign-ca.json", review("0b5e8c1e-0003-4c1e-9d7e-000000000003", "UPDATE", vwc, koordV, manager, saGroups("koordinator-system"),
		config(vwc, koordV, nil, hook{"vpod.koordinator.sh", foreign}, hook{"vnode.koordinator.sh", owner}), oldV, false))
	write(reviews, "rotation-overlap.json", review("0b5e8c1e-0004-4c1e-9d7e-000000000004", "UPDATE", vwc, koordV, manager, saGroups("koordinator-system"),
		config(vwc, koordV, nil, hook{"vpod.koordinator.sh", owner + next}, hook{"vnode.koordinator.sh", owner + next}), oldV, false))
	write(reviews, "garbage-pem.json", review("0b5e8c1e-0005-4c1e-9d7e-000000000005", "UPDATE", vwc, koordV, manager, saGroups("koordinator-system"),
		config(vwc, koordV, nil, hook{"vpod.koordinator.sh", "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"}, hook{"vnode.koordinator.sh", owner}), oldV, false))
	write(reviews, "delete-intruder.json", review("0b5e8c1e-0006-4c1e-9d7e-000000000006", "DELETE", vwc, koordV, intruder, saGroups("kube-system"),
		nil, oldV, false))
	write(reviews, "breakglass.json", review("0b5e8c1e-0007-4c1e-9d7e-000000000007", "UPDATE", mwc, koordM, "kubernetes-admin", []string{"system:masters", "system:authenticated"},
		config(mwc, koordM, nil, hook{"mpod.koordinator.sh", foreign}), oldM, false))
	write(reviews, "intruder-dry-run.json", review("0b5e8c1e-0008-4c1e-9d7e-000000000008", "UPDATE", mwc, koordM, intruder, saGroups("kube-system"),
		config(mwc, koordM, nil, hook{"mpod.koordinator.sh", owner}), oldM, true))

	inject := map[string]string{"cert-manager.io/inject-ca-from": "istio-system/istiod-webhook"}
	oldIstio := config(mwc, "istio-sidecar-injector", inject, hook{"sidecar-injector.istio.io", ""})
	write(reviews, "cainjector.json", review("0b5e8c1e-0009-4c1e-9d7e-000000000009", "UPDATE", mwc, "istio-sidecar-injector",
		"system:serviceaccount:cert-manager:cert-manager-cainjector", saGroups("cert-manager"),
		config(mwc, "istio-sidecar-injector", inject, hook{"sidecar-injector.istio.io", istio}), oldIstio, false))
	write(reviews, "cainjector-app-writes-own-ca.json", review("0b5e8c1e-0010-4c1e-9d7e-000000000010", "UPDATE", mwc, "istio-sidecar-injector",
		"system:serviceaccount:istio-system:istiod", saGroups("istio-system"),
		config(mwc, "istio-sidecar-injector", inject, hook{"sidecar-injector.istio.io", foreign}), oldIstio, false))
	write(reviews, "broken-source.json", review("0b5e8c1e-0011-4c1e-9d7e-000000000011", "UPDATE", vwc, "broken-webhook", "system:serviceaccount:broken:controller", saGroups("broken"),
		config(vwc, "broken-webhook", nil, hook{"v.broken.io", owner}), config(vwc, "broken-webhook", nil, hook{"v.broken.io", ""}), false))
}
