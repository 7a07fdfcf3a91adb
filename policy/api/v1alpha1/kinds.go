package v1alpha1

import (
	"encoding/base64"
	"encoding/json"
)

// KindInfo is a guarded kind: a kind of object whose caBundles
// kube-apiserver trusts, which a mapping names. Kinds holds one row per
// kind, and what differs between the kinds is read from it: where
// kube-apiserver serves the kind, the Match field that names its objects,
// its short name, whether a mapping owns the object or only its trust, and
// where an object holds its entries. The code that must read an object's
// fields in its own Go type (the admission decoder, the typed lists of
// discover and the probe) handles each kind explicitly; the completeness
// tests of those packages walk Kinds, so that a kind they miss fails a
// test (CONTRIBUTING.md's checklist for a new guarded kind names them).
type KindInfo struct {
	Kind, Group, Version, Resource string
	// Field is the Match field that names objects of the kind (its JSON
	// name).
	Field string
	// ShortName abbreviates the kind in report names and tables: kubectl's
	// short name, or its resource in the singular where kubectl has none.
	ShortName string
	// OwnsTrustOnly: a mapping owns only the trust of an object of the
	// kind (its entry's caBundle and endpoint), not the object, and names
	// each object: a label selector never selects one. A
	// CustomResourceDefinition's schema and an APIService's group priority
	// are their installer's (Helm, OLM, Argo CD), who is not the controller
	// that injects the CA, and a label must not bring a cluster's every CRD
	// under a mapping.
	OwnsTrustOnly bool
	// NameHint is the validation message for a name without a dot, where
	// kube-apiserver names every object of the kind with one (<plural>.<group>,
	// <version>.<group>); "" where any name is valid.
	NameHint string
	// Entries is where an object of the kind holds its entries.
	Entries Entries
	// example is an object of the kind in JSON, with one entry that calls
	// a Service and has no caBundle (Example fills it in).
	example string
}

// Entries is where an object of a kind holds its entries: what
// kube-apiserver calls over TLS, each trusting the CAs of its caBundle. A
// path lists the fields from the object's root, as JSON names them.
type Entries struct {
	// List is the field of a list of entries, each named by its own name
	// field (a webhook configuration's webhooks); "" for a kind whose
	// object holds at most one entry, named Name.
	List string
	// Name names the one entry as decisions, messages and records name it;
	// "" for a list.
	Name string
	// Label names the one entry in a sentence ("the conversion webhook");
	// "" for a list, whose entries are List[i].
	Label string
	// At is the path of the one entry: its fields are under it.
	At []string
	// Present is the path whose presence means that the object holds its
	// one entry: a CRD holds it with conversion strategy Webhook, an
	// APIService unless it is local (served by kube-apiserver itself).
	Present []string
	// ClientConfig is the path, under an entry (At, or an item of List), of
	// the object that holds its caBundle, url and service; empty where the
	// entry holds them itself (an APIService's spec).
	ClientConfig []string
	// InsecureSkipTLSVerify: the entry has the field of that name, which
	// makes kube-apiserver trust any serving certificate.
	InsecureSkipTLSVerify bool
}

// The names of the one entry a CustomResourceDefinition or an APIService
// holds, as decisions, messages and records name it.
const (
	// EntryConversion is a CRD's conversion webhook (with strategy Webhook).
	EntryConversion = "conversion"
	// EntryService is an APIService's service (a local APIService has none).
	EntryService = "service"
)

// One reports whether an object of the kind holds at most one entry
// (Name, at At) rather than a List.
func (e Entries) One() bool { return e.List == "" }

// ClientConfigPath is the path of the object that holds the caBundle, url
// and service: of the one entry from the object's root, or of each item
// of List from the item.
func (e Entries) ClientConfigPath() []string {
	return append(append([]string{}, e.At...), e.ClientConfig...)
}

// CABundlePath is the path of the caBundle: of the one entry from the
// object's root, or of each item of List from the item.
func (e Entries) CABundlePath() []string { return append(e.ClientConfigPath(), "caBundle") }

// ClientConfigOf is the map of obj (an object as JSON decodes it) that
// holds the one entry's caBundle, url and service, read in place; false
// when obj does not hold the entry (nothing at Present: a CRD without a
// conversion webhook, a local APIService) or holds no such map.
func (e Entries) ClientConfigOf(obj map[string]any) (map[string]any, bool) {
	if _, present := mapAt(obj, e.Present); !present {
		return nil, false
	}
	return mapAt(obj, e.ClientConfigPath())
}

// CABundleIn is the caBundle of a clientConfig map (ClientConfigOf's),
// decoded from the base64 that JSON carries; nil when it holds none. A
// value that is not base64, which kube-apiserver would not have stored, is
// kept as it is: it parses as no certificate.
func CABundleIn(clientConfig map[string]any) []byte {
	s, _ := clientConfig["caBundle"].(string)
	if s == "" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return []byte(s)
	}
	return b
}

// InsecureSkipTLSVerifyOf reports whether the one entry of obj skips
// verification: false for a kind whose entry has no such field.
func (e Entries) InsecureSkipTLSVerifyOf(obj map[string]any) bool {
	if !e.InsecureSkipTLSVerify {
		return false
	}
	at, ok := mapAt(obj, e.At)
	skip, _ := at["insecureSkipTLSVerify"].(bool)
	return ok && skip
}

// mapAt is the map at path in obj; false when there is none.
func mapAt(obj map[string]any, path []string) (map[string]any, bool) {
	for _, k := range path {
		next, ok := obj[k].(map[string]any)
		if !ok {
			return nil, false
		}
		obj = next
	}
	return obj, obj != nil
}

// APIVersion is the kind's group/version.
func (k KindInfo) APIVersion() string { return k.Group + "/" + k.Version }

// Kinds are the guarded kinds, in Match.Named's order: one row each.
var Kinds = [...]KindInfo{
	{
		Kind: KindValidatingWebhookConfiguration, Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations",
		Field: "validating", ShortName: "vwc",
		Entries: webhookEntries,
		example: webhookExample,
	},
	{
		Kind: KindMutatingWebhookConfiguration, Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations",
		Field: "mutating", ShortName: "mwc",
		Entries: webhookEntries,
		example: webhookExample,
	},
	{
		Kind: KindCustomResourceDefinition, Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
		Field: "customResourceDefinitions", ShortName: "crd", OwnsTrustOnly: true,
		NameHint: "a CustomResourceDefinition is named <plural>.<group>, such as certificates.cert-manager.io",
		Entries: Entries{
			Name: EntryConversion, Label: "the conversion webhook",
			At: []string{"spec", "conversion", "webhook"}, Present: []string{"spec", "conversion", "webhook"},
			ClientConfig: []string{"clientConfig"},
		},
		example: `{"metadata":{"name":"widgets.example.webhook-guard.io"},"spec":{"group":"example.webhook-guard.io",` +
			`"conversion":{"strategy":"Webhook","webhook":{"conversionReviewVersions":["v1"],` +
			`"clientConfig":{"service":{"namespace":"example-system","name":"example-webhook","path":"/convert","port":443}}}}}}`,
	},
	{
		Kind: KindAPIService, Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices",
		Field: "apiServices", ShortName: "apiservice", OwnsTrustOnly: true,
		NameHint: "an APIService is named <version>.<group>, such as v1beta1.metrics.k8s.io",
		Entries: Entries{
			Name: EntryService, Label: "the APIService",
			At: []string{"spec"}, Present: []string{"spec", "service"},
			InsecureSkipTLSVerify: true,
		},
		example: `{"metadata":{"name":"v1.example.webhook-guard.io"},"spec":{"group":"example.webhook-guard.io","version":"v1",` +
			`"groupPriorityMinimum":1000,"versionPriority":15,"service":{"namespace":"example-system","name":"example-webhook","port":443}}}`,
	},
}

// webhookEntries are a webhook configuration's: webhooks[], each with its
// clientConfig.
var webhookEntries = Entries{List: "webhooks", ClientConfig: []string{"clientConfig"}}

// webhookExample is a webhook configuration of either kind.
const webhookExample = `{"metadata":{"name":"example-webhook"},"webhooks":[{"name":"example.webhook-guard.io",` +
	`"admissionReviewVersions":["v1"],"sideEffects":"None",` +
	`"clientConfig":{"service":{"namespace":"example-system","name":"example-webhook","path":"/validate","port":443}}}]}`

// KindInfoOf is the entry of Kinds for kind; false for any other kind.
func KindInfoOf(kind string) (KindInfo, bool) {
	for _, k := range Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindInfo{}, false
}

// Example is an object of the kind, as JSON decodes it, with one entry
// that calls Service example-system/example-webhook on port 443 and
// trusts caBundle. Completeness tests in other packages (the decoder, the
// observer, the probe, discover, the GitOps rules) read one object per
// kind from it, so that a new kind cannot be left out of them.
func (k KindInfo) Example(caBundle []byte) map[string]any {
	var obj map[string]any
	if err := json.Unmarshal([]byte(k.example), &obj); err != nil {
		return nil // Test_kindExamples holds every row's example to JSON
	}
	obj["apiVersion"], obj["kind"] = k.APIVersion(), k.Kind
	bundle := base64.StdEncoding.EncodeToString(caBundle)
	if k.Entries.One() {
		setNested(obj, bundle, k.Entries.CABundlePath())
		return obj
	}
	items, _ := obj[k.Entries.List].([]any)
	for _, item := range items {
		if m, ok := item.(map[string]any); ok {
			setNested(m, bundle, k.Entries.CABundlePath())
		}
	}
	return obj
}

// ExampleName is the name of Example's object.
func (k KindInfo) ExampleName() string {
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal([]byte(k.example), &obj) // Test_kindExamples holds it to JSON
	return obj.Metadata.Name
}

// ExampleMatch names the example object (ExampleName) of every kind: the
// match of the one mapping of the completeness tests of other packages.
func ExampleMatch() Match {
	var m Match
	for _, k := range Kinds {
		if p := m.NamesOf(k.Kind); p != nil {
			*p = []string{k.ExampleName()}
		}
	}
	return m
}

// setNested sets the value at path in obj, making the maps on the way.
func setNested(obj map[string]any, value any, path []string) {
	for _, f := range path[:len(path)-1] {
		next, ok := obj[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[f] = next
		}
		obj = next
	}
	obj[path[len(path)-1]] = value
}
