package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

const header = "apiVersion: webhook-guard.io/v1alpha1\nkind: GuardConfig\n"

// ownerDoc is a valid document with one mapping whose fields are given as
// YAML lines under "- ", so each case changes only what it is about.
func ownerDoc(ownerLines string) string {
	return header + "owners:\n- " + testpki.Indent(ownerLines, 2)[2:] + "\n"
}

const (
	validMatch   = "match: {validating: [koord]}"
	validWriters = "writers: {serviceAccounts: [koordinator-system/koord-manager]}"
	validCA      = "ca: {secret: {namespace: koordinator-system, name: webhook-certs}}"
)

func owner(lines ...string) string {
	out := "name: koordinator"
	for _, l := range lines {
		out += "\n" + l
	}
	return ownerDoc(out)
}

func Test_Load(t *testing.T) {
	f := testFixtures(t)

	fullDoc := header + `defaultMode: enforce
breakGlass:
  groups: [system:masters]
  users: [admin@example.com]
  serviceAccounts: [kube-system/break-glass]
unmanaged: audit
certManager:
  caInjectorServiceAccount: cert-manager/cainjector
  clusterResourceNamespace: cm-resources
flapping:
  maxDistinctBundles: 4
  window: 5m
owners:
- name: koordinator
  mode: audit
  match:
    validating: [koord-validating-webhook-configuration]
    mutating: [koord-mutating-webhook-configuration]
  writers:
    serviceAccounts: [koordinator-system/koord-manager]
    users: [koord-admin]
    groups: [koord-admins]
  ca: {secret: {namespace: koordinator-system, name: webhook-certs, key: tls-ca.crt}}
- name: kyverno
  match: {labelSelector: {matchLabels: {app.kubernetes.io/part-of: kyverno}}}
  writers: {serviceAccounts: [kyverno/kyverno-admission-controller]}
  ca: {configMap: {namespace: kyverno, name: kyverno-ca}}
- name: trust-manager
  match: {validating: [trust-manager]}
  writers: {serviceAccounts: [cert-manager/trust-manager]}
  ca: {certificate: {namespace: cert-manager, name: trust-manager}}
- name: approver-policy
  match: {validating: [cert-manager-approver-policy]}
  writers: {serviceAccounts: [cert-manager/cert-manager-approver-policy]}
  ca: {issuer: {kind: Issuer, namespace: cert-manager, name: approver-policy-ca}}
- name: gatekeeper
  match: {validating: [gatekeeper-validating-webhook-configuration]}
  writers: {serviceAccounts: [gatekeeper-system/gatekeeper-admin]}
  ca: {issuer: {kind: ClusterIssuer, name: cluster-ca}}
- name: istio
  match: {mutating: [istio-sidecar-injector]}
  ca: {injectedByCertManager: {}}
- name: legacy
  match: {validating: [legacy]}
  writers: {users: [legacy-operator]}
  ca:
    pem: |
` + testpki.Indent(string(f.Inline.PEM), 6) + "\n"

	fullSpec := guardapi.GuardConfig{
		TypeMeta:    metav1.TypeMeta{APIVersion: guardapi.APIVersion, Kind: guardapi.Kind},
		DefaultMode: guardapi.ModeEnforce,
		BreakGlass: guardapi.Subjects{
			ServiceAccounts: []string{"kube-system/break-glass"},
			Users:           []string{"admin@example.com"},
			Groups:          []string{"system:masters"},
		},
		Unmanaged:   guardapi.UnmanagedAudit,
		CertManager: guardapi.CertManagerSettings{CAInjectorServiceAccount: "cert-manager/cainjector", ClusterResourceNamespace: "cm-resources"},
		Flapping:    guardapi.FlappingSettings{MaxDistinctBundles: 4, Window: metav1.Duration{Duration: 5 * time.Minute}},
		Owners: []guardapi.Owner{
			{
				Name: "koordinator",
				Mode: guardapi.ModeAudit,
				Match: guardapi.Match{
					Validating: []string{"koord-validating-webhook-configuration"},
					Mutating:   []string{"koord-mutating-webhook-configuration"},
				},
				Writers: guardapi.Subjects{
					ServiceAccounts: []string{"koordinator-system/koord-manager"},
					Users:           []string{"koord-admin"},
					Groups:          []string{"koord-admins"},
				},
				CA: guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "tls-ca.crt"}},
			},
			{
				Name:    "kyverno",
				Match:   guardapi.Match{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/part-of": "kyverno"}}},
				Writers: guardapi.Subjects{ServiceAccounts: []string{"kyverno/kyverno-admission-controller"}},
				CA:      guardapi.CASource{ConfigMap: &guardapi.KeyRef{Namespace: "kyverno", Name: "kyverno-ca", Key: "ca.crt"}},
			},
			{
				Name:    "trust-manager",
				Match:   guardapi.Match{Validating: []string{"trust-manager"}},
				Writers: guardapi.Subjects{ServiceAccounts: []string{"cert-manager/trust-manager"}},
				CA:      guardapi.CASource{Certificate: &guardapi.ObjectRef{Namespace: "cert-manager", Name: "trust-manager"}},
			},
			{
				Name:    "approver-policy",
				Match:   guardapi.Match{Validating: []string{"cert-manager-approver-policy"}},
				Writers: guardapi.Subjects{ServiceAccounts: []string{"cert-manager/cert-manager-approver-policy"}},
				CA:      guardapi.CASource{Issuer: &guardapi.IssuerRef{Kind: "Issuer", Namespace: "cert-manager", Name: "approver-policy-ca"}},
			},
			{
				Name:    "gatekeeper",
				Match:   guardapi.Match{Validating: []string{"gatekeeper-validating-webhook-configuration"}},
				Writers: guardapi.Subjects{ServiceAccounts: []string{"gatekeeper-system/gatekeeper-admin"}},
				CA:      guardapi.CASource{Issuer: &guardapi.IssuerRef{Kind: "ClusterIssuer", Name: "cluster-ca"}},
			},
			{
				Name:  "istio",
				Match: guardapi.Match{Mutating: []string{"istio-sidecar-injector"}},
				CA:    guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{}},
			},
			{
				Name:    "legacy",
				Match:   guardapi.Match{Validating: []string{"legacy"}},
				Writers: guardapi.Subjects{Users: []string{"legacy-operator"}},
				CA:      guardapi.CASource{PEM: string(f.Inline.PEM)},
			},
		},
	}

	defaultedSpec := guardapi.GuardConfig{
		TypeMeta:    metav1.TypeMeta{APIVersion: guardapi.APIVersion, Kind: guardapi.Kind},
		DefaultMode: guardapi.ModeAudit,
		Unmanaged:   guardapi.UnmanagedAllow,
		CertManager: guardapi.CertManagerSettings{CAInjectorServiceAccount: "cert-manager/cert-manager-cainjector", ClusterResourceNamespace: "cert-manager"},
		Flapping:    guardapi.FlappingSettings{MaxDistinctBundles: 3, Window: metav1.Duration{Duration: 10 * time.Minute}},
		Owners: []guardapi.Owner{{
			Name:    "koordinator",
			Match:   guardapi.Match{Validating: []string{"koord"}},
			Writers: guardapi.Subjects{ServiceAccounts: []string{"koordinator-system/koord-manager"}},
			CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "koordinator-system", Name: "webhook-certs", Key: "ca.crt"}},
		}},
	}

	tests := map[string]struct {
		input   string
		expSpec *guardapi.GuardConfig
		expErr  string
	}{
		"if the configuration uses every field and every CA source kind, load it as written": {
			input:   fullDoc,
			expSpec: &fullSpec,
		},
		"if the same configuration is written as JSON, load it the same": {
			input: `{"apiVersion": "webhook-guard.io/v1alpha1", "kind": "GuardConfig", "owners": [{"name": "koordinator",
				"match": {"validating": ["koord"]}, "writers": {"serviceAccounts": ["koordinator-system/koord-manager"]},
				"ca": {"secret": {"namespace": "koordinator-system", "name": "webhook-certs"}}}]}`,
			expSpec: &defaultedSpec,
		},
		"if optional settings are left out, apply the defaults": {
			input:   owner(validMatch, validWriters, validCA),
			expSpec: &defaultedSpec,
		},
		"if the configuration has no owners, load it: every configuration is unmanaged": {
			input: header + "owners: []\n",
			expSpec: &guardapi.GuardConfig{
				TypeMeta:    metav1.TypeMeta{APIVersion: guardapi.APIVersion, Kind: guardapi.Kind},
				DefaultMode: guardapi.ModeAudit,
				Unmanaged:   guardapi.UnmanagedAllow,
				CertManager: guardapi.CertManagerSettings{CAInjectorServiceAccount: "cert-manager/cert-manager-cainjector", ClusterResourceNamespace: "cert-manager"},
				Flapping:    guardapi.FlappingSettings{MaxDistinctBundles: 3, Window: metav1.Duration{Duration: 10 * time.Minute}},
				Owners:      []guardapi.Owner{},
			},
		},
		"if a field is misspelled, return an error naming its path": {
			input:  owner(validMatch, "writer: {serviceAccounts: [koordinator-system/koord-manager]}", validCA),
			expErr: `cannot decode GuardConfig: unknown field "owners[0].writer"`,
		},
		"if a top-level field is unknown, return an error naming it": {
			input:  header + "defaultMod: enforce\nowners: []\n",
			expErr: `cannot decode GuardConfig: unknown field "defaultMod"`,
		},
		"if a field is given twice, return an error naming the key and its line": {
			input:  owner(validMatch, validWriters, "writers: {users: [mallory]}", validCA),
			expErr: "not valid YAML: yaml: unmarshal errors:\n  line 7: key \"writers\" already set in map",
		},
		"if a field is given twice in JSON, return an error naming the key": {
			input:  `{"apiVersion": "webhook-guard.io/v1alpha1", "apiVersion": "v1", "kind": "GuardConfig", "owners": []}`,
			expErr: "not valid YAML: yaml: unmarshal errors:\n  line 1: key \"apiVersion\" already set in map",
		},
		"if the YAML is invalid, return a YAML error": {
			input:  header + "owners: [\n",
			expErr: `not valid YAML: yaml: line 3: did not find expected node content`,
		},
		"if a field has the wrong type, return a decode error": {
			input:  header + "owners: {name: koordinator}\n",
			expErr: `cannot decode GuardConfig: json: cannot unmarshal object into Go struct field GuardConfig.owners of type []v1alpha1.Owner`,
		},
		"if the file is empty, say so": {
			input:  "",
			expErr: "the configuration is empty",
		},
		"if the file holds only whitespace, say it is empty": {
			input:  " \n\t\n",
			expErr: "the configuration is empty",
		},
		"if apiVersion and kind are wrong, return both errors": {
			input:  "apiVersion: v1\nkind: ConfigMap\nowners: []\n",
			expErr: `[apiVersion: Invalid value: "v1": must be webhook-guard.io/v1alpha1, kind: Invalid value: "ConfigMap": must be GuardConfig]`,
		},
		"if the mode is unknown, list the supported modes": {
			input:  header + "defaultMode: deny\nowners: []\n",
			expErr: `defaultMode: Unsupported value: "deny": supported values: "audit", "enforce"`,
		},
		"if a mapping's mode is unknown, name the mapping's path": {
			input:  owner("mode: Enforce", validMatch, validWriters, validCA),
			expErr: `owners[0].mode: Unsupported value: "Enforce": supported values: "audit", "enforce"`,
		},
		"if unmanaged is unknown, list the supported actions": {
			input:  header + "unmanaged: deny\nowners: []\n",
			expErr: `unmanaged: Unsupported value: "deny": supported values: "allow", "audit"`,
		},
		"if a mapping has no CA source, list the sources": {
			input:  owner(validMatch, validWriters),
			expErr: `owners[0].ca: Required value: exactly one CA source: one of secret, configMap, certificate, issuer, injectedByCertManager, pem`,
		},
		"if a mapping has two CA sources, name both": {
			input:  owner(validMatch, validWriters, "ca: {secret: {namespace: a, name: b}, certificate: {namespace: a, name: b}}"),
			expErr: `owners[0].ca: Invalid value: "certificate, secret": exactly one CA source may be set; the owner's CA must come from a single place`,
		},
		"if a service account has no namespace, ask for namespace/name": {
			input:  owner(validMatch, "writers: {serviceAccounts: [koord-manager]}", validCA),
			expErr: `owners[0].writers.serviceAccounts[0]: Invalid value: "koord-manager": must be "namespace/name"`,
		},
		"if a service account is written as a username, hint at namespace/name": {
			input:  owner(validMatch, "writers: {serviceAccounts: [\"system:serviceaccount:a:b\"]}", validCA),
			expErr: `owners[0].writers.serviceAccounts[0]: Invalid value: "system:serviceaccount:a:b": must be "namespace/name"; hint: write it as "namespace/name", not as a username`,
		},
		"if a service account has two slashes, reject it": {
			input:  owner(validMatch, "writers: {serviceAccounts: [a/b/c]}", validCA),
			expErr: `owners[0].writers.serviceAccounts[0]: Invalid value: "a/b/c": must be "namespace/name"`,
		},
		"if a service account's namespace is not a DNS label, reject it": {
			input:  owner(validMatch, "writers: {serviceAccounts: [Koord_System/koord-manager]}", validCA),
			expErr: `owners[0].writers.serviceAccounts[0]: Invalid value: "Koord_System/koord-manager": namespace: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		},
		"if a service account's name is not a DNS subdomain, reject it": {
			input:  owner(validMatch, "writers: {serviceAccounts: [koordinator-system/Koord_Manager]}", validCA),
			expErr: `owners[0].writers.serviceAccounts[0]: Invalid value: "koordinator-system/Koord_Manager": name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"if a reference's namespace and name are not DNS names, report both": {
			input:  owner(validMatch, validWriters, "ca: {configMap: {namespace: Koord_System, name: Webhook_CA}}"),
			expErr: `[owners[0].ca.configMap.namespace: Invalid value: "Koord_System": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'), owners[0].ca.configMap.name: Invalid value: "Webhook_CA": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]`,
		},
		"if a break-glass user or group is blank, reject it": {
			input:  header + "breakGlass: {users: [\" \"], groups: [\"\"]}\nowners: []\n",
			expErr: `[breakGlass.users[0]: Required value: a username, breakGlass.groups[0]: Required value: a group name]`,
		},
		"if the cainjector service account is malformed, reject it": {
			input:  header + "certManager: {caInjectorServiceAccount: cainjector}\nowners: []\n",
			expErr: `certManager.caInjectorServiceAccount: Invalid value: "cainjector": must be "namespace/name"`,
		},
		"if the cluster resource namespace is not a DNS label, reject it": {
			input:  header + "certManager: {clusterResourceNamespace: Cert_Manager}\nowners: []\n",
			expErr: `certManager.clusterResourceNamespace: Invalid value: "Cert_Manager": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
		},
		"if a mapping has empty writers, require one": {
			input:  owner(validMatch, "writers: {serviceAccounts: [], users: [], groups: []}", validCA),
			expErr: `owners[0].writers: Required value: at least one service account, user or group; hint: the owner's controller usually runs as a service account "namespace/name"`,
		},
		"if a mapping has no writers at all, require one": {
			input:  owner(validMatch, validCA),
			expErr: `owners[0].writers: Required value: at least one service account, user or group; hint: the owner's controller usually runs as a service account "namespace/name"`,
		},
		"if a mapping has no writers but its CA is injected by cert-manager, load it: cainjector writes": {
			input: ownerDoc("name: istio\nmatch: {mutating: [istio-sidecar-injector]}\nca: {injectedByCertManager: {}}"),
		},
		"if an injectedByCertManager source pins both a certificate and a secret, refuse: cainjector reads one annotation": {
			input:  owner(validMatch, validWriters, "ca: {injectedByCertManager: {certificate: {namespace: a, name: b}, secret: {namespace: a, name: c}}}"),
			expErr: `owners[0].ca.injectedByCertManager: Invalid value: "certificate and secret": pin at most one of certificate or secret: cainjector reads one annotation`,
		},
		"if an injectedByCertManager pin has no namespace, require one": {
			input:  owner(validMatch, validWriters, "ca: {injectedByCertManager: {certificate: {name: b}}}"),
			expErr: `owners[0].ca.injectedByCertManager.certificate.namespace: Required value`,
		},
		"if a mapping pins its injected CA, load it": {
			input: ownerDoc("name: istio\nmatch: {mutating: [istio-sidecar-injector]}\nca: {injectedByCertManager: {secret: {namespace: istio-system, name: istio-ca}}}"),
		},
		"if a mapping has no name, require one": {
			input:  ownerDoc(validMatch + "\n" + validWriters + "\n" + validCA),
			expErr: `owners[0].name: Required value: used in messages, metrics and reports`,
		},
		"if a mapping's name is not a DNS subdomain, reject it": {
			input:  ownerDoc("name: Koord_Inator\n" + validMatch + "\n" + validWriters + "\n" + validCA),
			expErr: `owners[0].name: Invalid value: "Koord_Inator": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		"if a mapping matches nothing, require a match": {
			input:  owner("match: {}", validWriters, validCA),
			expErr: `owners[0].match: Required value: at least one of validating, mutating, customResourceDefinitions, apiServices or labelSelector`,
		},
		"if a label selector is empty, reject it: it would match every configuration": {
			input:  owner("match: {labelSelector: {}}", validWriters, validCA),
			expErr: `owners[0].match.labelSelector: Invalid value: "{}": an empty selector would match every webhook configuration; name the labels to match`,
		},
		"if a label selector is invalid, return the selector error": {
			input:  owner("match: {labelSelector: {matchExpressions: [{key: app, operator: Near, values: [x]}]}}", validWriters, validCA),
			expErr: `owners[0].match.labelSelector: Invalid value: "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:app,Operator:Near,Values:[x],},},}": "Near" is not a valid label selector operator`,
		},
		"if a configuration name is not a DNS subdomain, reject it": {
			input:  owner("match: {validating: [Koord_Webhook, \"\"]}", validWriters, validCA),
			expErr: `[owners[0].match.validating[0]: Invalid value: "Koord_Webhook": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), owners[0].match.validating[1]: Required value: a configuration name]`,
		},
		"if two mappings claim one configuration name, name both mappings": {
			input: header + `owners:
- name: koordinator
  match: {validating: [shared-webhook]}
  ` + validWriters + `
  ` + validCA + `
- name: kyverno
  match: {validating: [shared-webhook]}
  writers: {serviceAccounts: [kyverno/kyverno]}
  ca: {secret: {namespace: kyverno, name: ca}}
`,
			expErr: `owners[1].match.validating[0]: Duplicate value: "ValidatingWebhookConfiguration \"shared-webhook\" is already owned by owners[0] (koordinator); a configuration must have a single owner: remove it from one of \"koordinator\" and \"kyverno\""`,
		},
		"if one mapping lists a name twice, report the duplicate": {
			input:  owner("match: {mutating: [koord, koord]}", validWriters, validCA),
			expErr: `owners[0].match.mutating[1]: Duplicate value: "koord"`,
		},
		"if a validating and a mutating configuration share a name, load it: they are different objects": {
			input: header + `owners:
- name: koordinator
  match: {validating: [koord]}
  ` + validWriters + `
  ` + validCA + `
- name: kyverno
  match: {mutating: [koord]}
  writers: {serviceAccounts: [kyverno/kyverno]}
  ca: {secret: {namespace: kyverno, name: ca}}
`,
		},
		"if a mapping with names and a selector and a mapping named after its selector policy would generate one policy, name both": {
			input: header + `owners:
- name: app
  match: {validating: [a], labelSelector: {matchLabels: {team: a}}}
  writers: {users: [a]}
  ca: {secret: {namespace: a, name: ca}}
- name: app-selected
  match: {validating: [b]}
  writers: {users: [b]}
  ca: {secret: {namespace: b, name: ca}}
`,
			expErr: `owners[1].name: Invalid value: "app-selected": generates the policy "webhook-guard-app-selected", as does owners[0] (app); the guard would write it for each in turn: rename "app" or "app-selected"`,
		},
		"if a mapping is named after another mapping's CA policy, name both, whichever comes first": {
			input: header + `owners:
- name: app-ca
  match: {validating: [b]}
  writers: {users: [b]}
  ca: {secret: {namespace: b, name: ca}}
- name: app
  match: {validating: [a]}
  writers: {users: [a]}
  ca: {secret: {namespace: a, name: ca}}
`,
			expErr: `owners[1].name: Invalid value: "app": generates the policy "webhook-guard-app-ca", as does owners[0] (app-ca); the guard would write it for each in turn: rename "app-ca" or "app"`,
		},
		"if a mapping has only a selector, its policy takes the plain name, and a mapping named <name>-selected does not collide": {
			input: header + `owners:
- name: app
  match: {labelSelector: {matchLabels: {team: a}}}
  writers: {users: [a]}
  ca: {secret: {namespace: a, name: ca}}
- name: app-selected
  match: {validating: [b]}
  writers: {users: [b]}
  ca: {secret: {namespace: b, name: ca}}
`,
		},
		"if a mapping's name is too long for the policy names generated from it, say which name": {
			input:  ownerDoc("name: " + strings.Repeat("a", 230) + "\n" + validMatch + "\n" + validWriters + "\n" + validCA),
			expErr: `owners[0].name: Invalid value: "` + strings.Repeat("a", 230) + `": the policy name "webhook-guard-` + strings.Repeat("a", 230) + `-selected-ca" generated from it is invalid: must be no more than 253 characters`,
		},
		"if two mappings have the same name, report the duplicate": {
			input: header + `owners:
- name: koordinator
  match: {validating: [a]}
  ` + validWriters + `
  ` + validCA + `
- name: koordinator
  match: {validating: [b]}
  ` + validWriters + `
  ` + validCA + `
`,
			expErr: `owners[1].name: Duplicate value: "koordinator (also owners[0].name)"`,
		},
		"if a ClusterIssuer has a namespace, forbid it": {
			input:  owner(validMatch, validWriters, "ca: {issuer: {kind: ClusterIssuer, namespace: cert-manager, name: ca}}"),
			expErr: `owners[0].ca.issuer.namespace: Forbidden: a ClusterIssuer is cluster-scoped; its CA Secret is read from certManager.clusterResourceNamespace`,
		},
		"if an Issuer has no namespace, require one": {
			input:  owner(validMatch, validWriters, "ca: {issuer: {kind: Issuer, name: ca}}"),
			expErr: `owners[0].ca.issuer.namespace: Required value`,
		},
		"if the issuer kind is unknown, list the supported kinds": {
			input:  owner(validMatch, validWriters, "ca: {issuer: {kind: Vault, namespace: a, name: ca}}"),
			expErr: `owners[0].ca.issuer.kind: Unsupported value: "Vault": supported values: "Issuer", "ClusterIssuer"`,
		},
		"if a secret reference has no name and a bad key, report both": {
			input:  owner(validMatch, validWriters, "ca: {secret: {namespace: koordinator-system, key: \"ca crt\"}}"),
			expErr: `[owners[0].ca.secret.name: Required value, owners[0].ca.secret.key: Invalid value: "ca crt": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')]`,
		},
		"if a certificate reference has no namespace, require one": {
			input:  owner(validMatch, validWriters, "ca: {certificate: {name: koord}}"),
			expErr: `owners[0].ca.certificate.namespace: Required value`,
		},
		"if the inline pem is garbage, reject it": {
			input:  owner(validMatch, validWriters, "ca: {pem: not a certificate}"),
			expErr: `owners[0].ca.pem: Invalid value: "<pem>": is not PEM: no "-----BEGIN CERTIFICATE-----" block found`,
		},
		"if the inline pem holds a private key, reject it": {
			input:  owner(validMatch, validWriters, "ca:\n  pem: |\n"+testpki.Indent(string(f.KeyPEM), 4)),
			expErr: `owners[0].ca.pem: Invalid value: "<pem>": holds no certificate kube-apiserver can use (PEM block 0 is a "EC PRIVATE KEY", not a CERTIFICATE; kube-apiserver skips such blocks)`,
		},
		"if maxDistinctBundles is below 2, reject it: a rotation writes two bundles": {
			input:  header + "flapping: {maxDistinctBundles: 1}\nowners: []\n",
			expErr: `flapping.maxDistinctBundles: Invalid value: 1: must be >= 2: a CA rotation legitimately writes old+new, then new`,
		},
		"if the flapping window is negative, reject it": {
			input:  header + "flapping: {window: -1m}\nowners: []\n",
			expErr: `flapping.window: Invalid value: "-1m0s": must be a positive duration such as 10m`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Load([]byte(test.input))
			if test.expErr != "" {
				require.EqualError(t, err, test.expErr)
				assert.Nil(t, c)
				return
			}
			require.NoError(t, err)
			if test.expSpec != nil {
				assert.Equal(t, *test.expSpec, c.Spec)
			}
		})
	}
}
