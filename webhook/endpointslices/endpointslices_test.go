package endpointslices

import (
	"testing"

	"github.com/stretchr/testify/assert"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func Test_ReadyCount(t *testing.T) {
	s := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
		{Conditions: discoveryv1.EndpointConditions{Ready: new(true)}},
		{}, // unknown counts as ready
		{Conditions: discoveryv1.EndpointConditions{Ready: new(false)}},
	}}
	assert.Equal(t, 2, ReadyCount(s))
}

func Test_Count(t *testing.T) {
	type slice struct {
		t     discoveryv1.AddressType
		ready int
	}
	tests := map[string]struct {
		slices []slice
		want   int
	}{
		"if a Service has several slices of one family, their ready endpoints add up": {
			slices: []slice{{discoveryv1.AddressTypeIPv4, 2}, {discoveryv1.AddressTypeIPv4, 1}}, want: 3,
		},
		"if a dual-stack Service lists its pods once per family, it has the largest family's": {
			slices: []slice{{discoveryv1.AddressTypeIPv4, 2}, {discoveryv1.AddressTypeIPv6, 2}, {discoveryv1.AddressTypeIPv6, 1}}, want: 3,
		},
		"if a slice is FQDN, nothing routes to it: it does not count": {
			slices: []slice{{discoveryv1.AddressTypeFQDN, 5}}, want: 0,
		},
		"if a Service has no slice, it has no ready endpoint": {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c Count
			for _, s := range tc.slices {
				c.Add(s.t, s.ready)
			}
			assert.Equal(t, tc.want, c.Total())
		})
	}
}
