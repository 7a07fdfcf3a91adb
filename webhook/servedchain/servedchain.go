// Package servedchain checks the certificate chain an entry's endpoint
// serves against the entry's caBundle, as kube-apiserver's client checks it
// when it calls the entry: one server name rule, one TLS floor, one rule for
// an empty caBundle and one result, for every caller (the trust-path
// prober, `scan`, `check --served-chain`).
//
// A check has three steps, each usable alone: the roots a caBundle gives
// (RootsOf: an empty caBundle is the system roots, one that holds no
// certificate fails before any dial), a handshake that reads the served
// chain within bounds (Dialer.Dial), and the verification of a chain for the
// server name at a time (Roots.Verify). Dialer.Check runs the three for one
// address; the prober dials an address once and verifies what it served
// against every caBundle that trusts it.
package servedchain

import (
	"net"
	"net/url"
	"strconv"
)

// Endpoint is what kube-apiserver calls for an entry: its clientConfig.url,
// or its Service.
type Endpoint struct {
	// URL is clientConfig.url; "" when the entry calls a Service.
	URL string
	// Service is the Service the entry calls; nil when it calls URL.
	Service *Service
}

// Service is clientConfig.service (an APIService's spec.service).
type Service struct {
	Namespace, Name string
	// Port is the Service's port; 0 is kube-apiserver's default, 443.
	Port int32
}

// DefaultPort is the port kube-apiserver calls when the entry names none.
const DefaultPort = 443

// ServerName is the name kube-apiserver verifies the served certificate for
// (and sends as SNI): <service>.<namespace>.svc for a Service, the URL's
// host otherwise ("" when the URL does not parse).
func (e Endpoint) ServerName() string {
	if e.Service != nil {
		return e.Service.DNSName()
	}
	u, err := url.Parse(e.URL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// URLAddress is the host:port the URL names (port 443 when it names none).
func (e Endpoint) URLAddress() (string, error) {
	u, err := url.Parse(e.URL)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(DefaultPort)
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// DNSName is the Service's name in the cluster's DNS, the server name
// kube-apiserver verifies for it: <service>.<namespace>.svc.
func (s Service) DNSName() string { return s.Name + "." + s.Namespace + ".svc" }

// DNSAddress is the Service's name and port as a client outside kube-proxy
// dials them: <service>.<namespace>.svc:<port>.
func (s Service) DNSAddress() string { return joinAddr(s.DNSName(), s.port()) }

func (s Service) port() int32 {
	if s.Port == 0 {
		return DefaultPort
	}
	return s.Port
}

// joinAddr is host:port.
func joinAddr(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
