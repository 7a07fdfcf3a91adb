// Package endpointslices reads a Service's ready endpoints from its
// EndpointSlices, one way for every reader: the trust-path prober's
// addresses to dial (Reader, Addresses), and scan's and the observer's
// count of ready endpoints (ReadyCount, Count). Each reads the slices its
// own way (the prober lists one Service's by label, scan lists them all
// once, the observer watches them and keeps a count per slice); what makes
// an endpoint ready, whose slices a Service has and how address types
// combine is decided here.
package endpointslices

import (
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ControllerManagedBy is the endpointslice.kubernetes.io/managed-by value
// of the slices kube-controller-manager's endpointslice controller writes
// from a Service's ready pods.
const ControllerManagedBy = "endpointslice-controller.k8s.io"

// ServiceName is the Service a slice belongs to: its
// kubernetes.io/service-name label ("" for none).
func ServiceName(s *discoveryv1.EndpointSlice) string {
	return s.Labels[discoveryv1.LabelServiceName]
}

// Ready reports whether an endpoint is ready: its ready condition is true,
// or unset (unknown, which consumers treat as ready).
func Ready(ep *discoveryv1.Endpoint) bool {
	return ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

// ReadyCount is how many of a slice's endpoints are ready.
func ReadyCount(s *discoveryv1.EndpointSlice) int {
	n := 0
	for i := range s.Endpoints {
		if Ready(&s.Endpoints[i]) {
			n++
		}
	}
	return n
}

// Count adds up a Service's ready endpoints by address type. A dual-stack
// Service's slices list each pod once per IP family, so the Service has as
// many ready endpoints as its largest family, not their sum; an FQDN slice
// is never routed to (kube-proxy and kube-apiserver's endpoint resolver
// read IP slices only) and does not count.
type Count struct {
	ipv4, ipv6, other int
}

// Add counts ready endpoints of a slice of address type t.
func (c *Count) Add(t discoveryv1.AddressType, ready int) {
	switch t {
	case discoveryv1.AddressTypeIPv4:
		c.ipv4 += ready
	case discoveryv1.AddressTypeIPv6:
		c.ipv6 += ready
	case discoveryv1.AddressTypeFQDN:
	default:
		// The API requires one of the three types; a slice without one
		// (a fake's) counts as a family of its own.
		c.other += ready
	}
}

// Total is the Service's ready endpoints: its largest family's.
func (c Count) Total() int { return max(c.ipv4, c.ipv6, c.other) }
