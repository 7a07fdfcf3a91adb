package discover

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

func short(ca *testpki.CA) string {
	sum := sha256.Sum256(ca.Cert.Raw)
	return hex.EncodeToString(sum[:])[:16]
}

func svcConfig(kind policy.GuardedKind, name, ns, svc string, bundle []byte, managers ...string) Configuration {
	return Configuration{Kind: kind, Name: name, CABundleManagers: managers,
		Webhooks: []Webhook{{Name: "w.example.com", Service: &ServiceRef{Namespace: ns, Name: svc}, CABundle: bundle}}}
}

// koordinator is a cluster where Deployment koord-manager, running as
// koord-manager, sits behind Service koordinator-webhook-service and mounts
// Secret webhook-certs, whose ca-cert.pem is the CA.
func koordinator(ca *testpki.CA, extra ...Source) Cluster {
	return Cluster{
		CAInjector: "cert-manager/cert-manager-cainjector",
		Services: map[string]Service{"koordinator-system/koordinator-webhook-service": {
			Namespace: "koordinator-system", Name: "koordinator-webhook-service", Selector: map[string]string{"koord-app": "koord-manager"}, ReadyEndpoints: 1,
		}},
		Workloads: []Workload{
			{Kind: "Deployment", Namespace: "koordinator-system", Name: "koord-manager", ServiceAccount: "koord-manager",
				TemplateLabels: map[string]string{"koord-app": "koord-manager", "pod-template-hash": "x"}, Secrets: []string{"webhook-certs"}},
			{Kind: "Deployment", Namespace: "koordinator-system", Name: "koord-scheduler", ServiceAccount: "koord-scheduler",
				TemplateLabels: map[string]string{"koord-app": "koord-scheduler"}},
		},
		Sources: append([]Source{
			{Kind: SourceSecret, Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca-cert.pem", PEM: ca.PEM},
		}, extra...),
	}
}

// lookalike is a copy of a CA's public certificate in a namespace named like
// Koordinator's, which holds a cert-manager Certificate (so discover reads
// its Secrets): anyone may create one.
func lookalike(ca *testpki.CA) Source {
	return Source{Kind: SourceSecret, Namespace: "koordinator-systen", Name: "webhook-certs", Key: "ca.crt", PEM: ca.PEM, Certificate: "webhook-certs"}
}

func Test_Propose(t *testing.T) {
	koordCA := testpki.MustCA(t, "koord-ca")
	otherCA := testpki.MustCA(t, "other-ca")
	koordSA := []string{"koordinator-system/koord-manager"}
	koordEvidence := func(ref string) []string {
		return []string{
			ref + ": webhooks[0] calls Service koordinator-system/koordinator-webhook-service, which selects Deployment koordinator-system/koord-manager (service account koord-manager)",
			ref + ": Secret koordinator-system/webhook-certs key ca-cert.pem holds the caBundle's CA " + short(koordCA) + " and is mounted by the workload",
		}
	}
	tests := map[string]struct {
		configs []Configuration
		cluster Cluster
		want    Proposal
	}{
		"if a Service selects a Deployment mounting the Secret that holds the caBundle's CA, map both configurations to its service account and that Secret": {
			configs: []Configuration{
				svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM),
				svcConfig(policy.KindMutating, "koord-mutating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM),
			},
			cluster: koordinator(koordCA),
			want: Proposal{Mappings: []Mapping{{
				Owner: guardapi.Owner{Name: "koord-manager",
					Match:   guardapi.Match{Validating: []string{"koord-validating"}, Mutating: []string{"koord-mutating"}},
					Writers: guardapi.Subjects{ServiceAccounts: koordSA},
					CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca-cert.pem"}}},
				Evidence: append(koordEvidence("ValidatingWebhookConfiguration/koord-validating"), koordEvidence("MutatingWebhookConfiguration/koord-mutating")...),
			}}},
		},
		"if another key of the Secret holds the CA and more (a chain), propose the key holding the CA alone, which the writer copies": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM)},
			cluster: koordinator(koordCA, Source{Kind: SourceSecret, Namespace: "koordinator-system", Name: "webhook-certs", Key: "a-chain.pem", PEM: slices.Concat(otherCA.PEM, koordCA.PEM)}),
			want: Proposal{Mappings: []Mapping{{
				Owner: guardapi.Owner{Name: "koord-manager", Match: guardapi.Match{Validating: []string{"koord-validating"}},
					Writers: guardapi.Subjects{ServiceAccounts: koordSA},
					CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca-cert.pem"}}},
				Evidence: koordEvidence("ValidatingWebhookConfiguration/koord-validating"),
			}}},
		},
		"if two field managers own caBundle, say so in the evidence and still map the workload": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM, "koord-manager", "rogue")},
			cluster: koordinator(koordCA),
			want: Proposal{Mappings: []Mapping{{
				Owner: guardapi.Owner{Name: "koord-manager", Match: guardapi.Match{Validating: []string{"koord-validating"}},
					Writers: guardapi.Subjects{ServiceAccounts: koordSA},
					CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca-cert.pem"}}},
				Evidence: append(koordEvidence("ValidatingWebhookConfiguration/koord-validating"),
					"ValidatingWebhookConfiguration/koord-validating: caBundle field managers: koord-manager, rogue (2 writers of caBundle: the guard records every write by a subject that is not this mapping's writer)"),
			}}},
		},
		"if the matching Secret is a cert-manager Certificate's, propose the Certificate as the CA source": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", otherCA.PEM)},
			cluster: func() Cluster {
				c := koordinator(koordCA, Source{Kind: SourceSecret, Namespace: "koordinator-system", Name: "serving", Key: "ca.crt", PEM: otherCA.PEM, Certificate: "koord-serving"})
				c.Workloads[0].Secrets = append(c.Workloads[0].Secrets, "serving")
				return c
			}(),
			want: Proposal{Mappings: []Mapping{{
				Owner: guardapi.Owner{Name: "koord-manager", Match: guardapi.Match{Validating: []string{"koord-validating"}},
					Writers: guardapi.Subjects{ServiceAccounts: koordSA},
					CA:      guardapi.CASource{Certificate: &guardapi.ObjectRef{Namespace: "koordinator-system", Name: "koord-serving"}}},
				Evidence: []string{
					"ValidatingWebhookConfiguration/koord-validating: webhooks[0] calls Service koordinator-system/koordinator-webhook-service, which selects Deployment koordinator-system/koord-manager (service account koord-manager)",
					"ValidatingWebhookConfiguration/koord-validating: Secret koordinator-system/serving key ca.crt holds the caBundle's CA " + short(otherCA) + " and is mounted by the workload",
					"ValidatingWebhookConfiguration/koord-validating: Secret koordinator-system/serving is the Secret of cert-manager Certificate koordinator-system/koord-serving",
				},
			}}},
		},
		"if the configuration carries inject-ca-from and no workload is found, map it to cainjector alone": {
			configs: []Configuration{{Kind: policy.KindMutating, Name: "app-mutating", Annotations: map[string]string{"cert-manager.io/inject-ca-from": "app/serving"},
				Webhooks: []Webhook{{Name: "w.example.com", Service: &ServiceRef{Namespace: "app", Name: "gone"}}}}},
			cluster: koordinator(koordCA),
			want: Proposal{Mappings: []Mapping{{
				Owner: guardapi.Owner{Name: "app-mutating", Match: guardapi.Match{Mutating: []string{"app-mutating"}},
					CA: guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{Certificate: &guardapi.ObjectRef{Namespace: "app", Name: "serving"}}}},
				Evidence: []string{
					"MutatingWebhookConfiguration/app-mutating: annotation cert-manager.io/inject-ca-from: app/serving: cainjector (cert-manager/cert-manager-cainjector) writes the caBundle",
					"MutatingWebhookConfiguration/app-mutating: webhooks[0] calls Service app/gone, which does not exist",
					"cainjector (cert-manager/cert-manager-cainjector) becomes a writer of this mapping through certManager.caInjectorServiceAccount",
					"no workload was found behind the webhooks: only cainjector may write; add whoever applies these configurations (Helm's or Argo CD's identity) to writers",
				},
			}}},
		},
		"if cainjector's field manager owns caBundle, the evidence says that it merges": {
			configs: []Configuration{{Kind: policy.KindMutating, Name: "app-mutating", Annotations: map[string]string{"cert-manager.io/inject-ca-from": "app/serving"},
				CABundleManagers: []string{"cert-manager-cainjector"},
				Webhooks:         []Webhook{{Name: "w.example.com", Service: &ServiceRef{Namespace: "app", Name: "gone"}}}}},
			cluster: koordinator(koordCA),
			want: Proposal{Mappings: []Mapping{{
				Owner: guardapi.Owner{Name: "app-mutating", Match: guardapi.Match{Mutating: []string{"app-mutating"}},
					CA: guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{Certificate: &guardapi.ObjectRef{Namespace: "app", Name: "serving"}}}},
				Evidence: []string{
					"MutatingWebhookConfiguration/app-mutating: annotation cert-manager.io/inject-ca-from: app/serving: cainjector (cert-manager/cert-manager-cainjector) writes the caBundle",
					"MutatingWebhookConfiguration/app-mutating: caBundle field managers: cert-manager-cainjector",
					"MutatingWebhookConfiguration/app-mutating: cert-manager-cainjector merges (cert-manager >= v1.21, feature gate CAInjectorMerging, on by default): a rotation appends the new CA and keeps the old ones until they expire; the guard allows it, as a rotation may keep what the entry already holds",
					"MutatingWebhookConfiguration/app-mutating: webhooks[0] calls Service app/gone, which does not exist",
					"cainjector (cert-manager/cert-manager-cainjector) becomes a writer of this mapping through certManager.caInjectorServiceAccount",
					"no workload was found behind the webhooks: only cainjector may write; add whoever applies these configurations (Helm's or Argo CD's identity) to writers",
				},
			}}},
		},
		"if the webhook calls a URL, leave it undecided and say it has no workload": {
			configs: []Configuration{{Kind: policy.KindValidating, Name: "by-url", CABundleManagers: []string{"kubectl"},
				Webhooks: []Webhook{{Name: "w.example.com", URL: "https://10.0.0.1:8443/validate", CABundle: otherCA.PEM}}}},
			cluster: koordinator(koordCA),
			want: Proposal{Undecided: []Undecided{{Configuration: "ValidatingWebhookConfiguration/by-url",
				Reasons: []string{
					"webhooks[0] calls clientConfig.url https://10.0.0.1:8443/validate, not a Service: no workload, so no service account to name as the writer",
					"the caBundle's CA " + short(otherCA) + " matches no Secret or ConfigMap discover can read",
				},
				Evidence: []string{"webhooks[0] calls clientConfig.url https://10.0.0.1:8443/validate", "caBundle field managers: kubectl"},
			}}},
		},
		"if the workload mounts two Secrets holding the CA, leave it undecided naming both": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM)},
			cluster: func() Cluster {
				c := koordinator(koordCA, Source{Kind: SourceSecret, Namespace: "koordinator-system", Name: "copy", Key: "ca.crt", PEM: koordCA.PEM})
				c.Workloads[0].Secrets = append(c.Workloads[0].Secrets, "copy")
				return c
			}(),
			want: Proposal{Undecided: []Undecided{{Configuration: "ValidatingWebhookConfiguration/koord-validating",
				Reasons:  []string{"the workload mounts 2 candidate CA sources holding the caBundle's CA " + short(koordCA) + ": Secret koordinator-system/copy key ca.crt, Secret koordinator-system/webhook-certs key ca-cert.pem"},
				Evidence: []string{"webhooks[0] calls Service koordinator-system/koordinator-webhook-service, which selects Deployment koordinator-system/koord-manager (service account koord-manager)"},
			}}},
		},
		"if the workload does not mount its CA Secret (as koord-manager, which reads it through the API) and a lookalike namespace holds a copy, the Secret in the webhooks' namespace wins and the copy is evidence": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM)},
			cluster: func() Cluster {
				c := koordinator(koordCA, lookalike(koordCA))
				c.Workloads[0].Secrets = nil
				return c
			}(),
			want: Proposal{Mappings: []Mapping{{
				Owner: guardapi.Owner{Name: "koord-manager", Match: guardapi.Match{Validating: []string{"koord-validating"}},
					Writers: guardapi.Subjects{ServiceAccounts: koordSA},
					CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca-cert.pem"}}},
				Evidence: []string{
					"ValidatingWebhookConfiguration/koord-validating: webhooks[0] calls Service koordinator-system/koordinator-webhook-service, which selects Deployment koordinator-system/koord-manager (service account koord-manager)",
					"ValidatingWebhookConfiguration/koord-validating: Secret koordinator-system/webhook-certs key ca-cert.pem holds the caBundle's CA " + short(koordCA) + ", in the webhooks' namespace (not mounted by the workload)",
					"ValidatingWebhookConfiguration/koord-validating: copies of the caBundle's CA " + short(koordCA) + " outside the webhooks' namespace, not taken as the source: Secret koordinator-systen/webhook-certs key ca.crt",
				},
			}}},
		},
		"if the workload mounts its CA Secret and a lookalike namespace holds a copy, the mounted one wins and the copy is evidence": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM)},
			cluster: koordinator(koordCA, lookalike(koordCA)),
			want: Proposal{Mappings: []Mapping{{
				Owner: guardapi.Owner{Name: "koord-manager", Match: guardapi.Match{Validating: []string{"koord-validating"}},
					Writers: guardapi.Subjects{ServiceAccounts: koordSA},
					CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca-cert.pem"}}},
				Evidence: append(koordEvidence("ValidatingWebhookConfiguration/koord-validating"),
					"ValidatingWebhookConfiguration/koord-validating: copies of the caBundle's CA "+short(koordCA)+" outside the webhooks' namespace, not taken as the source: Secret koordinator-systen/webhook-certs key ca.crt"),
			}}},
		},
		"if only a namespace other than the webhooks' holds the CA, leave it undecided: a copy is never the source": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", otherCA.PEM)},
			cluster: koordinator(koordCA, lookalike(otherCA)),
			want: Proposal{Undecided: []Undecided{{Configuration: "ValidatingWebhookConfiguration/koord-validating",
				Reasons: []string{"the caBundle's CA " + short(otherCA) + " is held only outside the webhooks' namespace (the webhooks' namespace is koordinator-system), by Secret koordinator-systen/webhook-certs key ca.crt: " +
					"a copy elsewhere is not the owner's source; name the source in the mapping by hand"},
				Evidence: []string{"webhooks[0] calls Service koordinator-system/koordinator-webhook-service, which selects Deployment koordinator-system/koord-manager (service account koord-manager)"},
			}}},
		},
		"if two sources in the webhooks' namespace hold the CA and the workload mounts neither, leave it undecided naming both": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM)},
			cluster: func() Cluster {
				c := koordinator(koordCA, Source{Kind: SourceConfigMap, Namespace: "koordinator-system", Name: "copy", Key: "ca.crt", PEM: koordCA.PEM})
				c.Workloads[0].Secrets = nil
				return c
			}(),
			want: Proposal{Undecided: []Undecided{{Configuration: "ValidatingWebhookConfiguration/koord-validating",
				Reasons: []string{"2 candidate CA sources in the webhooks' namespace hold the caBundle's CA " + short(koordCA) + " and none is mounted by the workload: " +
					"ConfigMap koordinator-system/copy key ca.crt, Secret koordinator-system/webhook-certs key ca-cert.pem"},
				Evidence: []string{"webhooks[0] calls Service koordinator-system/koordinator-webhook-service, which selects Deployment koordinator-system/koord-manager (service account koord-manager)"},
			}}},
		},
		"if the caBundle is empty and nothing injects it, leave it undecided": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", nil)},
			cluster: koordinator(koordCA),
			want: Proposal{Undecided: []Undecided{{Configuration: "ValidatingWebhookConfiguration/koord-validating",
				Reasons:  []string{"every caBundle is empty and no cert-manager.io/inject-ca-from annotation names a CA: there is no CA to match"},
				Evidence: []string{"webhooks[0] calls Service koordinator-system/koordinator-webhook-service, which selects Deployment koordinator-system/koord-manager (service account koord-manager)"},
			}}},
		},
		"if one workload writes two configurations with different CAs, propose two mappings with distinct names": {
			configs: []Configuration{
				svcConfig(policy.KindValidating, "a", "koordinator-system", "koordinator-webhook-service", koordCA.PEM),
				svcConfig(policy.KindValidating, "b", "koordinator-system", "koordinator-webhook-service", otherCA.PEM),
			},
			cluster: func() Cluster {
				c := koordinator(koordCA, Source{Kind: SourceConfigMap, Namespace: "koordinator-system", Name: "other", Key: "ca.crt", PEM: otherCA.PEM})
				c.Workloads[0].ConfigMaps = []string{"other"}
				return c
			}(),
			want: Proposal{Mappings: []Mapping{
				{Owner: guardapi.Owner{Name: "koord-manager", Match: guardapi.Match{Validating: []string{"b"}}, Writers: guardapi.Subjects{ServiceAccounts: koordSA},
					CA: guardapi.CASource{ConfigMap: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "other", Key: "ca.crt"}}},
					Evidence: []string{
						"ValidatingWebhookConfiguration/b: webhooks[0] calls Service koordinator-system/koordinator-webhook-service, which selects Deployment koordinator-system/koord-manager (service account koord-manager)",
						"ValidatingWebhookConfiguration/b: ConfigMap koordinator-system/other key ca.crt holds the caBundle's CA " + short(otherCA) + " and is mounted by the workload",
					}},
				{Owner: guardapi.Owner{Name: "koord-manager-2", Match: guardapi.Match{Validating: []string{"a"}}, Writers: guardapi.Subjects{ServiceAccounts: koordSA},
					CA: guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca-cert.pem"}}},
					Evidence: koordEvidence("ValidatingWebhookConfiguration/a")},
			}},
		},
		"if the Service selects workloads running as two service accounts, leave it undecided naming both": {
			configs: []Configuration{svcConfig(policy.KindValidating, "koord-validating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM)},
			cluster: func() Cluster {
				c := koordinator(koordCA)
				c.Workloads[1].TemplateLabels = map[string]string{"koord-app": "koord-manager"}
				return c
			}(),
			want: Proposal{Undecided: []Undecided{{Configuration: "ValidatingWebhookConfiguration/koord-validating",
				Reasons: []string{"the webhooks' Services select workloads running as different service accounts: koordinator-system/koord-manager, koordinator-system/koord-scheduler"},
				Evidence: []string{
					"webhooks[0] calls Service koordinator-system/koordinator-webhook-service, which selects Deployment koordinator-system/koord-manager (service account koord-manager), Deployment koordinator-system/koord-scheduler (service account koord-scheduler)",
					"Secret koordinator-system/webhook-certs key ca-cert.pem holds the caBundle's CA " + short(koordCA) + " and is mounted by the workload",
				},
			}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, Propose(tc.configs, tc.cluster))
		})
	}
}

// Test_caKey_everyKind: configurations are grouped by their CA source, so
// every kind's example must key apart from every other kind's, and an equal
// source (a second example, with its own pointers) must key like it.
func Test_caKey_everyKind(t *testing.T) {
	seen := map[string]string{}
	for _, k := range guardapi.CASourceKinds() {
		ex := k.Example()
		key := caKey(ex)
		assert.Equal(t, key, caKey(k.Example()), "%s: an equal source keys differently", string(k))
		if other, dup := seen[key]; dup {
			t.Errorf("%s and %s share the key %q", string(k), other, key)
		}
		seen[key] = string(k)
	}
}
