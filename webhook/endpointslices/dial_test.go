package endpointslices

import (
	"testing"

	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func Test_addresses(t *testing.T) {
	// slice is the endpointslice controller's IPv4 slice; handMade and
	// fqdn are slices anyone who may create one can write.
	slice := func(ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: eps,
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{discoveryv1.LabelManagedBy: ControllerManagedBy}}}
	}
	handMade := func(ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		s := slice(ports, eps...)
		s.Labels = map[string]string{discoveryv1.LabelManagedBy: "someone"}
		return s
	}
	ofType := func(t discoveryv1.AddressType, s discoveryv1.EndpointSlice) discoveryv1.EndpointSlice {
		s.AddressType = t
		return s
	}
	port := func(name string, target int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: new(name), Port: new(target)}
	}
	https := []discoveryv1.EndpointPort{port("https", 8443)}
	ep := func(addr string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	cases := map[string]struct {
		items   []discoveryv1.EndpointSlice
		want    []string
		wantErr string
	}{
		"if an endpoint's ready condition is unset or true, it is dialed at the slices' one port": {
			items: []discoveryv1.EndpointSlice{slice(https, ep("10.0.0.2", nil), ep("10.0.0.1", new(true)))},
			want:  []string{"10.0.0.1:8443", "10.0.0.2:8443"},
		},
		"if an endpoint is not ready, it is skipped": {
			items: []discoveryv1.EndpointSlice{slice(https, ep("10.0.0.1", new(false)))},
		},
		"if the Service has no slices, there is no address": {},
		"if a slice is not the endpointslice controller's, its endpoints are not dialed (and its ports not read)": {
			items: []discoveryv1.EndpointSlice{slice(https, ep("10.0.0.1", nil)), handMade([]discoveryv1.EndpointPort{port("other", 9443)}, ep("10.9.9.9", nil))},
			want:  []string{"10.0.0.1:8443"},
		},
		"if only a hand-made slice names endpoints, there is no address": {
			items: []discoveryv1.EndpointSlice{handMade(https, ep("10.9.9.9", nil))},
		},
		"if a slice's address type is FQDN, its endpoints are not dialed": {
			items: []discoveryv1.EndpointSlice{ofType(discoveryv1.AddressTypeFQDN, slice(https, ep("evil.example.com", nil)))},
		},
		"if an address is not an IP of the slice's type, it is not dialed": {
			items: []discoveryv1.EndpointSlice{
				slice(https, ep("evil.example.com", nil), ep("fd00::1", nil), ep("10.0.0.1", nil)),
				ofType(discoveryv1.AddressTypeIPv6, slice(https, ep("10.0.0.2", nil), ep("fd00::2", nil))),
			},
			want: []string{"10.0.0.1:8443", "[fd00::2]:8443"},
		},
		"if two slices hold one address, it is listed once": {
			items: []discoveryv1.EndpointSlice{slice(https, ep("10.0.0.1", nil)), slice(https, ep("10.0.0.1", nil))},
			want:  []string{"10.0.0.1:8443"},
		},
		"if the slices have several ports, the one numbered as the entry's port is dialed": {
			items: []discoveryv1.EndpointSlice{slice([]discoveryv1.EndpointPort{port("metrics", 9090), port("https", 443)}, ep("10.0.0.1", nil))},
			want:  []string{"10.0.0.1:443"},
		},
		"if the slices have several ports and none is the entry's, the error says the Service would be needed": {
			items:   []discoveryv1.EndpointSlice{slice([]discoveryv1.EndpointPort{port("metrics", 9090), port("https", 8443)}, ep("10.0.0.1", nil))},
			wantErr: "the Service's endpoints have 2 ports and none is 443: which one port 443 targets is named in the Service, which the guard does not read",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := addresses(tc.items, 443)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
