package webhook

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// entryDecoders read the entries of an object of each kind from the
// fields decodeReview decoded: the one place that knows which fields of a
// guardedObject hold a kind's entries (the rows of guardapi.Kinds say
// where they are in the object; decoding in one pass needs them as Go
// fields). Policy shape's generated objects have none: they are decided
// from their metadata (admissionPolicyObjectInput).
//
//exhaustive:enforce
var entryDecoders = map[policy.GuardedKind]func(*guardedObject) []policy.Entry{
	policy.KindValidating:             webhookEntries,
	policy.KindMutating:               webhookEntries,
	policy.KindCRD:                    func(o *guardedObject) []policy.Entry { return o.Spec.conversionEntries() },
	policy.KindAPIService:             func(o *guardedObject) []policy.Entry { return o.Spec.serviceEntries() },
	policy.KindAdmissionPolicy:        nil,
	policy.KindAdmissionPolicyBinding: nil,
}

// guardedKinds are the kinds the handler decides on, with the one group and
// version of each it is registered for: the rows of guardapi.Kinds whose
// entries it decodes. A row without an entry decoder is not guarded: its
// requests are rejected (a 400), never decided with no entries to check,
// and Test_decodeReview_everyKind fails for it. kube-apiserver sends an
// object in the version the registration's rules name (matchPolicy
// Equivalent converts), so another version means a misconfigured
// registration.
var guardedKinds = func() map[policy.GuardedKind]schema.GroupVersion {
	out := make(map[policy.GuardedKind]schema.GroupVersion, len(guardapi.Kinds))
	for _, k := range guardapi.Kinds {
		if entryDecoders[policy.GuardedKind(k.Kind)] != nil {
			out[policy.GuardedKind(k.Kind)] = schema.GroupVersion{Group: k.Group, Version: k.Version}
		}
	}
	return out
}()

// guardedKindList words guardedKinds for an error, in guardapi.Kinds' order.
var guardedKindList = func() string {
	parts := make([]string, 0, len(guardapi.Kinds))
	for _, k := range guardapi.Kinds {
		if _, ok := guardedKinds[policy.GuardedKind(k.Kind)]; ok {
			parts = append(parts, k.APIVersion()+" "+k.Kind)
		}
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
				CABundle caBundle    `json:"caBundle"`
				URL      string      `json:"url"`
				Service  *serviceRef `json:"service"`
			} `json:"clientConfig"`
		} `json:"webhook"`
	} `json:"conversion"`
	// Service, CABundle and InsecureSkipTLSVerify are an APIService's. A
	// local APIService (served by kube-apiserver itself) has no service
	// and no caBundle: nothing to trust.
	Service               *serviceRef `json:"service"`
	CABundle              caBundle    `json:"caBundle"`
	InsecureSkipTLSVerify bool        `json:"insecureSkipTLSVerify"`
}

// conversionEntries are a CRD's: none, or its conversion webhook, named
// policy.EntryConversion.
func (s *trustSpec) conversionEntries() []policy.Entry {
	if s.Conversion == nil || s.Conversion.Webhook == nil {
		return nil
	}
	cc := &s.Conversion.Webhook.ClientConfig
	return []policy.Entry{{Name: policy.EntryConversion, CABundle: cc.CABundle, Endpoint: cc.Service.endpoint(cc.URL)}}
}

// serviceEntries are an APIService's: none for a local APIService, or its
// service, named policy.EntryService.
func (s *trustSpec) serviceEntries() []policy.Entry {
	if s.Service == nil {
		return nil
	}
	return []policy.Entry{{Name: policy.EntryService, CABundle: s.CABundle, InsecureSkipTLSVerify: s.InsecureSkipTLSVerify, Endpoint: s.Service.endpoint("")}}
}

// serviceRef is a Service reference of a CRD's conversion webhook (with a
// path) or an APIService (without).
type serviceRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Path      string `json:"path"`
	Port      int32  `json:"port"`
}

// endpoint is the entry's endpoint: the service's, or the URL when there is
// no service.
func (r *serviceRef) endpoint(url string) policy.Endpoint {
	if r == nil {
		return policy.Endpoint{URL: url}
	}
	return policy.Endpoint{URL: url, Namespace: r.Namespace, Name: r.Name, Path: r.Path, Port: r.Port}
}
