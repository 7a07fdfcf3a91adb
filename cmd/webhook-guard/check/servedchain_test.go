package check_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/app"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// servedChainFiles writes a GuardConfig (owner app, its CA inline,
// verifyServing as given), the owner's review replacing an old CA with
// its own in entry w.example.com (URL https://hook.example.com/validate),
// the same write to an entry that calls Service app/hook, a DELETE review,
// and served chains: a leaf for hook.example.com under the owner's CA, one
// under another CA, one under the owner's CA for another name, and one for
// hook.app.svc.
func servedChainFiles(t *testing.T, verifyServing string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	owner, old, other := testpki.MustCA(t, "owner-ca"), testpki.MustCA(t, "old-ca"), testpki.MustCA(t, "other-ca")
	files := map[string]string{}
	write := func(name string, data []byte) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		files[name] = p
	}
	write("guard.yaml", []byte(`apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
- name: app
  mode: enforce
  verifyServing: `+verifyServing+`
  match:
    validating: [app-hook]
  writers: {serviceAccounts: [app/controller]}
  ca:
    pem: |
`+testpki.Indent(string(owner.PEM), 6)+"\n"))
	calling := func(ca []byte, cc map[string]any) map[string]any {
		cc["caBundle"] = base64.StdEncoding.EncodeToString(ca)
		return map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
			"metadata": map[string]any{"name": "app-hook"},
			"webhooks": []any{map[string]any{
				"name": "w.example.com", "sideEffects": "None", "admissionReviewVersions": []string{"v1"},
				"clientConfig": cc,
			}},
		}
	}
	vwc := func(ca []byte) map[string]any {
		return calling(ca, map[string]any{"url": "https://hook.example.com/validate"})
	}
	review := func(op string, obj map[string]any) []byte {
		req := map[string]any{
			"uid": "7c1e0d4e-0001-4c1e-9d7e-000000000001", "operation": op, "name": "app-hook",
			"kind":      map[string]any{"group": "admissionregistration.k8s.io", "version": "v1", "kind": "ValidatingWebhookConfiguration"},
			"resource":  map[string]any{"group": "admissionregistration.k8s.io", "version": "v1", "resource": "validatingwebhookconfigurations"},
			"userInfo":  map[string]any{"username": "system:serviceaccount:app:controller", "groups": []string{"system:serviceaccounts", "system:serviceaccounts:app", "system:authenticated"}},
			"oldObject": vwc(old.PEM),
		}
		if obj != nil {
			req["object"] = obj
		}
		data, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
		require.NoError(t, err)
		return data
	}
	write("owner.json", review("UPDATE", vwc(owner.PEM)))
	write("service.json", review("UPDATE", calling(owner.PEM, map[string]any{"service": map[string]any{"namespace": "app", "name": "hook", "port": 443}})))
	write("delete.json", review("DELETE", nil))
	leaf := func(ca *testpki.CA, host string) []byte {
		l, err := ca.Issue("webhook", host)
		require.NoError(t, err)
		return l.CertPEM
	}
	write("served-by-owner-ca.pem", leaf(owner, "hook.example.com"))
	write("served-by-other-ca.pem", leaf(other, "hook.example.com"))
	write("served-for-other-name.pem", leaf(owner, "elsewhere.example.com"))
	write("served-for-service.pem", leaf(owner, "hook.app.svc"))
	write("not-pem.pem", []byte("tls.crt holds no certificate\n"))
	return files
}

// Test_check_servedChain: with --served-chain, check decides the owner's
// write as the server does after a probe round that found the chain
// served: a caBundle that does not verify it is warned about (warn) or
// refused (deny), one that does passes quietly; bad input exits 2 naming
// the flag and what is wrong.
func Test_check_servedChain(t *testing.T) {
	tests := map[string]struct {
		verifyServing string
		review        string
		chains        []string
		exitCode      int
		want, wantNot []string
	}{
		"if the written bundle does not verify the served chain, warn naming the reason": {
			verifyServing: "warn", review: "owner.json", chains: []string{"served-by-other-ca.pem"}, exitCode: cmdutil.ExitAllowed,
			want: []string{"decision: allow", "does not verify the certificate", "unknown-authority", "file "},
		},
		"if it does not verify and verifyServing is deny, refuse it as serving-unverified": {
			verifyServing: "deny", review: "owner.json", chains: []string{"w.example.com=served-by-other-ca.pem"}, exitCode: cmdutil.ExitDenied,
			want: []string{"decision: deny", "serving-unverified", "unknown-authority"},
		},
		"if it verifies the served chain, allow without a warning": {
			verifyServing: "deny", review: "owner.json", chains: []string{"served-by-owner-ca.pem"}, exitCode: cmdutil.ExitAllowed,
			want: []string{"decision: allow"}, wantNot: []string{"does not verify"},
		},
		"if the served leaf is for another name, warn name-mismatch": {
			verifyServing: "warn", review: "owner.json", chains: []string{"served-for-other-name.pem"}, exitCode: cmdutil.ExitAllowed,
			want: []string{"name-mismatch", "hook.example.com"},
		},
		"if the written entry calls a Service, verify for <service>.<namespace>.svc": {
			verifyServing: "deny", review: "service.json", chains: []string{"served-for-service.pem"}, exitCode: cmdutil.ExitAllowed,
			want: []string{"decision: allow"}, wantNot: []string{"does not verify"},
		},
		"if the written entry calls a Service, a leaf for the URL's host is a name-mismatch for the Service's name": {
			verifyServing: "warn", review: "service.json", chains: []string{"served-by-owner-ca.pem"}, exitCode: cmdutil.ExitAllowed,
			want: []string{"name-mismatch", "for hook.app.svc"},
		},
		"if ENTRY names no entry of the object, exit 2 listing its entries": {
			verifyServing: "warn", review: "owner.json", chains: []string{"nope.example.com=served-by-owner-ca.pem"}, exitCode: cmdutil.ExitInvalid,
			want: []string{`has no entry "nope.example.com" (its entries: w.example.com)`},
		},
		"if the file holds no certificate, exit 2 saying so": {
			verifyServing: "warn", review: "owner.json", chains: []string{"not-pem.pem"}, exitCode: cmdutil.ExitInvalid,
			want: []string{"not-pem.pem: holds no PEM CERTIFICATE block"},
		},
		"if the review writes no object, exit 2 saying why": {
			verifyServing: "warn", review: "delete.json", chains: []string{"served-by-owner-ca.pem"}, exitCode: cmdutil.ExitInvalid,
			want: []string{"no request.object"},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			files := servedChainFiles(t, test.verifyServing)
			args := []string{"check", "--config", files["guard.yaml"], "--review", files[test.review]}
			for _, c := range test.chains {
				if entry, file, ok := bytes.Cut([]byte(c), []byte("=")); ok {
					args = append(args, "--served-chain", string(entry)+"="+files[string(file)])
				} else {
					args = append(args, "--served-chain", files[c])
				}
			}
			var stdout, stderr bytes.Buffer
			code := app.Main(args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			assert.Equal(t, test.exitCode, code, out)
			for _, w := range test.want {
				assert.Contains(t, out, w)
			}
			for _, w := range test.wantNot {
				assert.NotContains(t, out, w)
			}
		})
	}
}
