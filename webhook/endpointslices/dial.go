package endpointslices

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reader finds a Service's ready endpoints to dial from the EndpointSlices
// the endpointslice controller manages for it (labels
// kubernetes.io/service-name and endpointslice.kubernetes.io/managed-by):
// addresses of one list call.
type Reader struct {
	// Client lists EndpointSlices.
	Client client.Reader
}

// Ready lists the Service's slices of the endpointslice controller and
// returns their addresses for port; sorted.
func (r Reader) Ready(ctx context.Context, namespace, name string, port int32) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ControllerManagedBy}); err != nil {
		return nil, err
	}
	return addresses(list.Items, port)
}

// addresses are the host:port of the ready endpoints of a Service's slices
// that a non-writer cannot fill at will, at the port the entry's port
// reaches, sorted and without duplicates: of the slices the endpointslice
// controller manages (dialable), the first address of each ready endpoint
// (Ready), when it is an IP of the slice's address type.
//
// Only those, because anyone who may create an EndpointSlice can name any
// address in one: kube-apiserver routes a service reference to the
// Service's ClusterIP by default (kube-proxy then picks one of the pods the
// controller's slices list) and, with --enable-aggregator-routing, to a
// ready endpoint of the Service's slices; an FQDN address is never a pod.
// The controller deletes a slice carrying its label that the Service does
// not own and rewrites one that lists other endpoints than the Service's
// ready pods, so an address planted under its label is gone at its next
// sync (docs/hardening.md, "The probe dials what kube-apiserver would").
//
// kube-apiserver's endpoint resolver finds the Service's port whose number
// is the entry's port, then the slices' port of the same name. Reading the
// Service would need a grant the chart does not give (get on Services), so
// the port is found from the slices alone: their one port when they have
// one (a webhook Service's usual shape), otherwise the port whose number is
// the entry's (a Service whose targetPort is its port). A Service with
// several ports, none of them the entry's, is an error that says why.
func addresses(all []discoveryv1.EndpointSlice, port int32) ([]string, error) {
	var items []*discoveryv1.EndpointSlice
	for i := range all {
		if dialable(&all[i]) {
			items = append(items, &all[i])
		}
	}
	target, ok, err := targetPort(items, port)
	if !ok {
		return nil, err
	}
	var out []string
	for _, sl := range items {
		if !slices.ContainsFunc(sl.Ports, func(p discoveryv1.EndpointPort) bool {
			return p.Port != nil && *p.Port == target.port && (p.Name == nil) == (target.name == "") &&
				(p.Name == nil || *p.Name == target.name)
		}) {
			continue
		}
		for i := range sl.Endpoints {
			ep := &sl.Endpoints[i]
			if !Ready(ep) {
				continue
			}
			if ip, ok := endpointIP(ep, sl.AddressType); ok {
				out = append(out, net.JoinHostPort(ip, strconv.Itoa(int(target.port))))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// dialable reports whether a slice is one whose endpoints kube-apiserver
// may be routed to and a non-writer cannot fill at will: the controller's,
// of an IP address type (a list by label already asks for the
// controller's; a reader that ignores the selector is not trusted).
func dialable(sl *discoveryv1.EndpointSlice) bool {
	return sl.Labels[discoveryv1.LabelManagedBy] == ControllerManagedBy &&
		(sl.AddressType == discoveryv1.AddressTypeIPv4 || sl.AddressType == discoveryv1.AddressTypeIPv6)
}

// endpointIP is the endpoint's first address when it is an IP of the
// slice's type (kube-apiserver dials Addresses[0] only).
func endpointIP(ep *discoveryv1.Endpoint, t discoveryv1.AddressType) (string, bool) {
	if len(ep.Addresses) == 0 {
		return "", false
	}
	ip, err := netip.ParseAddr(ep.Addresses[0])
	if err != nil || ip.Zone() != "" || (t == discoveryv1.AddressTypeIPv4) != ip.Is4() {
		return "", false
	}
	return ip.String(), true
}

// slicePort is one port the slices name.
type slicePort struct {
	name string
	port int32
}

// targetPort is the slices' port the entry's port reaches (see
// addresses); false with no slices.
func targetPort(items []*discoveryv1.EndpointSlice, port int32) (slicePort, bool, error) {
	var ports []slicePort
	for _, sl := range items {
		for _, p := range sl.Ports {
			if p.Port == nil {
				continue
			}
			sp := slicePort{port: *p.Port}
			if p.Name != nil {
				sp.name = *p.Name
			}
			if !slices.Contains(ports, sp) {
				ports = append(ports, sp)
			}
		}
	}
	switch {
	case len(ports) == 0:
		return slicePort{}, false, nil
	case len(ports) == 1:
		return ports[0], true, nil
	}
	if i := slices.IndexFunc(ports, func(p slicePort) bool { return p.port == port }); i >= 0 {
		return ports[i], true, nil
	}
	return slicePort{}, false, fmt.Errorf("the Service's endpoints have %d ports and none is %d: which one port %d targets is named in the Service, which the guard does not read", len(ports), port, port)
}
