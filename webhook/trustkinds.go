package webhook

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/webhook-guard/webhook-guard/policy"
)

// guardedKinds are the kinds the handler decides on, with the one group and
// version of each it is registered for: the four kinds whose caBundles
// kube-apiserver trusts. kube-apiserver sends an object in the version the
// registration's rules name (matchPolicy Equivalent converts), so another
// version means a misconfigured registration.
var guardedKinds = map[policy.ConfigKind]schema.GroupVersion{
	policy.KindValidating: {Group: guardedGroup, Version: guardedVersion},
	policy.KindMutating:   {Group: guardedGroup, Version: guardedVersion},
	policy.KindCRD:        {Group: "apiextensions.k8s.io", Version: "v1"},
	policy.KindAPIService: {Group: "apiregistration.k8s.io", Version: "v1"},
}

// guardedKindList words guardedKinds for an error, in a fixed order.
var guardedKindList = func() string {
	kinds := []policy.ConfigKind{policy.KindValidating, policy.KindMutating, policy.KindCRD, policy.KindAPIService}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = guardedKinds[k].String() + " " + string(k)
	}
	return strings.Join(parts, ", ")
}()

// trustSpec is the part of a CustomResourceDefinition's or an APIService's
// spec that says whom kube-apiserver trusts to serve it. Both kinds decode
// into it (their fields do not overlap), skipping everything else.
type trustSpec struct {
	// Conversion is a CRD's; its webhook is set only with strategy Webhook.
	Conversion *struct {
		Webhook *struct {
			ClientConfig struct {
				CABundle caBundle `json:"caBundle"`
			} `json:"clientConfig"`
		} `json:"webhook"`
	} `json:"conversion"`
	// Service, CABundle and InsecureSkipTLSVerify are an APIService's. A
	// local APIService (served by kube-apiserver itself) has no service
	// and no caBundle: nothing to trust.
	Service *struct {
		Name string `json:"name"`
	} `json:"service"`
	CABundle              caBundle `json:"caBundle"`
	InsecureSkipTLSVerify bool     `json:"insecureSkipTLSVerify"`
}

// entries are the object's trusted entries: none, or one named as the
// decision names it (policy.EntryConversion, policy.EntryService).
func (s *trustSpec) entries(kind policy.ConfigKind) []policy.Webhook {
	switch kind {
	case policy.KindCRD:
		if s.Conversion == nil || s.Conversion.Webhook == nil {
			return nil
		}
		return []policy.Webhook{{Name: policy.EntryConversion, CABundle: s.Conversion.Webhook.ClientConfig.CABundle}}
	case policy.KindAPIService:
		if s.Service == nil {
			return nil
		}
		return []policy.Webhook{{Name: policy.EntryService, CABundle: s.CABundle, InsecureSkipTLSVerify: s.InsecureSkipTLSVerify}}
	default:
		return nil
	}
}
