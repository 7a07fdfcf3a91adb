package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"testing"

	admv1 "k8s.io/api/admissionregistration/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// TestTrustPathProbePlantedEndpoint: with verifyServing: deny, an endpoint
// added to a guarded entry's Service by a hand-made EndpointSlice (not the
// endpointslice controller's), serving a leaf for the Service's name under
// another CA, neither fails the probe nor blocks the owner's rotation
// through the real kube-apiserver: the guard dials only the endpoints of
// the controller's slices (kube-apiserver, here without
// --enable-aggregator-routing, calls the Service's ClusterIP, which
// kube-proxy balances over the controller's endpoints; no controller runs
// here, so a slice labelled as the controller's stands for its). A bundle
// that verifies no endpoint of the controller's is still refused.
//
// EndpointSlices refuse loopback addresses, so the two servers listen on
// the machine's own non-loopback IPv4 and IPv6 addresses.
func TestTrustPathProbePlantedEndpoint(t *testing.T) {
	t.Parallel()
	v4, v6 := hostAddresses(t)
	cfg := guardConfig()
	cfg.Owners[0].VerifyServing = guardapi.VerifyServingDeny
	f := newFixture(t, framework.Options{Config: cfg, GuardArgs: []string{"--probe-interval=1s"}, GuardRules: []rbacv1.PolicyRule{
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}})
	ctx := context.Background()
	const service = "probe-hook"
	serverName := service + "." + appNamespace + ".svc"
	planter := framework.NewCA(t, "planted-ca")
	ownerLeaf := keyPairFor(t, f.ownerCA.Issue(t, "webhook", serverName))
	planted := keyPairFor(t, planter.Issue(t, "webhook", serverName))
	serve := func(addr string, kp *tls.Certificate) string {
		return serveTLSOn(t, addr, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*kp}})
	}
	_, port, _ := net.SplitHostPort(serve(net.JoinHostPort(v4, "0"), ownerLeaf))
	serve(net.JoinHostPort(v6, port), planted)
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	port32 := int32(p)

	// The guarded entry calls the Service at the servers' port (setup by
	// break-glass, not under test).
	f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
	vwcs := f.env.AdminKube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	vwc, err := vwcs.Get(ctx, enforcedName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vwc.Webhooks[0].ClientConfig.URL = nil
	vwc.Webhooks[0].ClientConfig.Service = &admv1.ServiceReference{Namespace: appNamespace, Name: service, Port: &port32}
	if _, err := vwcs.Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := func(name, managedBy string, t6 discoveryv1.AddressType, addr string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: managedBy}},
			AddressType: t6,
			Ports:       []discoveryv1.EndpointPort{{Name: new("https"), Port: &port32}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}}},
		}
	}
	slices := f.env.AdminKube.DiscoveryV1().EndpointSlices(appNamespace)
	for _, s := range []*discoveryv1.EndpointSlice{
		slice(service+"-controller", "endpointslice-controller.k8s.io", discoveryv1.AddressTypeIPv4, v4),
		slice(service+"-planted", "someone", discoveryv1.AddressTypeIPv6, v6),
	} {
		if _, err := slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	entry := map[string]string{"kind": string(framework.Validating), "configuration": enforcedName, "webhook": vwc.Webhooks[0].Name}
	waitForProbe(t, f.env.Guard, "the entry is probed", func(m framework.Metrics) bool {
		return strings.Contains(m.Series("webhook_guard_trust_path_verified"), enforcedName)
	})
	afterTwoRounds(t, f.env.Guard) // a round that started after both slices were in place

	// The owner starts a rotation as cainjector does: the new CA beside
	// the one its endpoint serves under. Admitted.
	next := framework.NewCA(t, "probe-next-ca")
	both := append(append([]byte{}, f.ownerCA.PEM...), next.PEM...)
	f.setOwnerCA(t, both)
	if _, err := f.owner.SetCABundle(ctx, framework.Validating, enforcedName, both); err != nil {
		t.Fatalf("with a planted endpoint serving under another CA, the owner's rotation (old and new CA) was refused: %v", err)
	}
	if m := afterTwoRounds(t, f.env.Guard); m.Sum("webhook_guard_trust_path_verified", entry) != 1 {
		t.Fatalf("with the planted endpoint in place: want the gauge at 1 (the planted endpoint is not dialled); the series are\n%s%s",
			m.Series("webhook_guard_trust_path_verified"), m.Series("webhook_guard_trust_path_probe_failures_total"))
	}
	// A bundle that verifies no endpoint of the controller's is refused.
	_, err = f.owner.SetCABundle(ctx, framework.Validating, enforcedName, next.PEM)
	if err == nil || !strings.Contains(err.Error(), "serving-unverified") {
		t.Fatalf("the owner's write of a CA no endpoint serves under: want a serving-unverified denial, got %v", err)
	}
}

// hostAddresses are the machine's first non-loopback, non-link-local
// IPv4 and IPv6 addresses (an EndpointSlice takes no other); the test is
// skipped on a machine without both.
func hostAddresses(t *testing.T) (v4, v6 string) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() || n.IP.IsUnspecified() {
			continue
		}
		switch {
		case n.IP.To4() != nil && v4 == "":
			v4 = n.IP.String()
		case n.IP.To4() == nil && v6 == "":
			v6 = n.IP.String()
		}
	}
	if v4 == "" || v6 == "" {
		t.Skipf("needs a non-loopback IPv4 and IPv6 address of this machine (EndpointSlices refuse loopback), found %q and %q", v4, v6)
	}
	return v4, v6
}

// serveTLSOn serves cfg at addr until the test ends (each connection
// completes a handshake and is closed) and returns the address listened
// on.
func serveTLSOn(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}(c)
		}
	}()
	return l.Addr().String()
}
