package probe

import (
	"context"
	"fmt"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SliceEndpoints finds a Service's ready endpoints from its EndpointSlices
// (label kubernetes.io/service-name), the addresses of the endpoints that
// are ready (unset means ready).
//
// kube-apiserver's endpoint resolver finds the Service's port whose number
// is the entry's port, then the slices' port of the same name. Reading the
// Service would need a grant the chart does not give (get on Services), so
// the port is found from the slices alone: their one port when they have
// one (a webhook Service's usual shape), otherwise the port whose number is
// the entry's (a Service whose targetPort is its port). A Service with
// several ports, none of them the entry's, is reported as no-endpoints with
// an error that says why.
type SliceEndpoints struct {
	// Reader lists EndpointSlices.
	Reader client.Reader
}

// Ready implements Endpoints; addresses are sorted.
func (s SliceEndpoints) Ready(ctx context.Context, namespace, name string, port int32) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := s.Reader.List(ctx, &list, client.InNamespace(namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return nil, err
	}
	return readyAddresses(list.Items, port)
}

// slicePort is one port the slices name.
type slicePort struct {
	name string
	port int32
}

// targetPort is the slices' port the entry's port reaches (see
// SliceEndpoints); false with no slices.
func targetPort(items []discoveryv1.EndpointSlice, port int32) (slicePort, bool, error) {
	var ports []slicePort
	for i := range items {
		for _, p := range items[i].Ports {
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

// readyAddresses are the host:port of the slices' ready endpoints at the
// port the entry's port reaches, sorted and without duplicates.
func readyAddresses(items []discoveryv1.EndpointSlice, port int32) ([]string, error) {
	target, ok, err := targetPort(items, port)
	if !ok {
		return nil, err
	}
	var out []string
	for i := range items {
		sl := &items[i]
		if !slices.ContainsFunc(sl.Ports, func(p discoveryv1.EndpointPort) bool {
			return p.Port != nil && *p.Port == target.port && (p.Name == nil) == (target.name == "") &&
				(p.Name == nil || *p.Name == target.name)
		}) {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ready := ep.Conditions.Ready; (ready != nil && !*ready) || len(ep.Addresses) == 0 {
				continue
			}
			out = append(out, joinAddr(ep.Addresses[0], target.port))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
