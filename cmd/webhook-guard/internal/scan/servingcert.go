package scan

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
)

// CheckServingCert is the one serving-certificate check, whichever way the
// certificate was found: dialed (a mapped configuration's webhooks) or read
// from the Secret the workload behind the Service mounts (health).
const CheckServingCert = "serving-cert"

// servingCertField is the field a serving-certificate finding asks to
// change: the caBundle that must verify it.
const servingCertField = "clientConfig.caBundle"

// servingCert is a serving certificate as found.
type servingCert struct {
	// chain is the leaf first, then its intermediates.
	chain []*x509.Certificate
	// where names it in messages ("in Secret ns/name key tls.crt", "of
	// host:443").
	where string
	// renew is the fix of its expiry.
	renew string
}

// checkServingCert checks a serving certificate: expired (fail, and
// nothing more to say), expiring within the threshold (warn), and not
// verifying against the caBundle for dnsName (fail). A caBundle that is
// empty or holds no certificate is the CA checks' to report.
func checkServingCert(c servingCert, caBundle []byte, dnsName string, o Options, f findingFunc) []Finding {
	leaf, what := c.chain[0], "the serving certificate "+c.where
	out := expiry(f, CheckServingCert, servingCertField, what, leaf.NotAfter, o, c.renew)
	if !leaf.NotAfter.After(o.Now) {
		return out
	}
	roots := x509.NewCertPool()
	if len(caBundle) == 0 || !roots.AppendCertsFromPEM(caBundle) {
		return out
	}
	inter := x509.NewCertPool()
	for _, ic := range c.chain[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: dnsName, CurrentTime: o.Now}); err != nil {
		out = append(out, f(LevelFail, CheckServingCert, servingCertField,
			fmt.Sprintf("%s does not verify against the caBundle: %s", what, shortErr(err)),
			"make the caBundle hold the CA that signs the serving certificate (kube-apiserver's calls fail TLS until then)"))
	}
	return out
}

// expiry fails what expired and warns of what expires within the
// threshold.
func expiry(f findingFunc, check, field, what string, notAfter time.Time, o Options, fix string) []Finding {
	switch left := notAfter.Sub(o.Now); {
	case left <= 0:
		return []Finding{f(LevelFail, check, field, fmt.Sprintf("%s expired at %s", what, notAfter.UTC().Format(time.RFC3339)), fix)}
	case left < o.ExpiryThreshold:
		return []Finding{f(LevelWarn, check, field, fmt.Sprintf("%s expires at %s, in %s (under the %s threshold)", what,
			notAfter.UTC().Format(time.RFC3339), roundDays(left), roundDays(o.ExpiryThreshold)), fix)}
	}
	return nil
}

func roundDays(d time.Duration) string {
	if d >= 48*time.Hour {
		return strconv.Itoa(int(d.Hours()/24)) + "d"
	}
	return d.Round(time.Minute).String()
}

// dialServingCert dials the webhook (bounded by the dial timeout) for its
// serving certificate and checks it. One that cannot be reached (from
// outside the cluster, say) is an info finding: its expiry is unknown.
func dialServingCert(ctx context.Context, cc admv1.WebhookClientConfig, o Options, f findingFunc) []Finding {
	var addr, serverName string
	switch {
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return []Finding{f(LevelWarn, CheckServingCert, "", "clientConfig.url does not parse: "+err.Error(), "")}
		}
		port := u.Port()
		if port == "" {
			port = "443"
		}
		addr, serverName = net.JoinHostPort(u.Hostname(), port), u.Hostname()
	case cc.Service != nil:
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		serverName = cc.Service.Name + "." + cc.Service.Namespace + ".svc"
		addr = net.JoinHostPort(serverName, strconv.Itoa(int(port)))
	default:
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{ServerName: serverName, InsecureSkipVerify: true}} //nolint:gosec // only reads the certificate; checkServingCert verifies it against the caBundle
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return []Finding{f(LevelInfo, CheckServingCert, "", fmt.Sprintf("serving certificate expiry unknown: %s is not reachable from here (%v)", addr, shortErr(err)), "")}
	}
	defer func() { _ = conn.Close() }()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil
	}
	c := servingCert{chain: certs, where: "of " + addr, renew: "renew the serving certificate of " + addr}
	return checkServingCert(c, cc.CABundle, serverName, o, f)
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
