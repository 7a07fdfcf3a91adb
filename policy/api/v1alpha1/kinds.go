package v1alpha1

// KindInfo is a kind whose caBundles kube-apiserver trusts, and where
// kube-apiserver serves it: the one table of the group, version and
// resource of each kind a mapping names, from which the decoder, the
// generators, the records and the watches read them.
type KindInfo struct {
	Kind, Group, Version, Resource string
}

// APIVersion is the kind's group/version.
func (k KindInfo) APIVersion() string { return k.Group + "/" + k.Version }

// Kinds are the four kinds, in Match.Named's order.
var Kinds = [...]KindInfo{
	{Kind: KindValidatingWebhookConfiguration, Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
	{Kind: KindMutatingWebhookConfiguration, Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	{Kind: KindCustomResourceDefinition, Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	{Kind: KindAPIService, Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"},
}

// KindInfoOf is the entry of Kinds for kind; false for any other kind.
func KindInfoOf(kind string) (KindInfo, bool) {
	for _, k := range Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindInfo{}, false
}
