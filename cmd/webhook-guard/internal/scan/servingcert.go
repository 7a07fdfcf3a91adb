package scan

import (
	"context"
	"fmt"
	"strconv"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/webhook/servedchain"
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
	chain servedchain.Chain
	// where names it in messages ("in Secret ns/name key tls.crt", "of
	// host:443").
	where string
	// renew is the fix of its expiry.
	renew string
}

// checkServingCert checks a serving certificate against the caBundle for
// dnsName with the served-chain verifier (servedchain), kube-apiserver's
// rules: expired (fail, and nothing more to say), expiring within the
// threshold (warn), a caBundle that holds no certificate (fail: no call
// can succeed), and a chain that does not verify against the caBundle, or
// against the system roots when it is empty (fail).
func checkServingCert(c servingCert, caBundle []byte, dnsName string, o Options, f findingFunc) []Finding {
	return servingCertFindings(c, servedchain.Verify(c.chain, caBundle, dnsName, o.Now), o, f)
}

// servingCertFindings words a serving certificate's check.
func servingCertFindings(c servingCert, res servedchain.Result, o Options, f findingFunc) []Finding {
	leaf, what := c.chain.Certs()[0], "the serving certificate "+c.where
	out := expiry(f, CheckServingCert, servingCertField, what, leaf.NotAfter, o, c.renew)
	if !leaf.NotAfter.After(o.Now) || res.Verified() {
		return out
	}
	return append(out, servingVerifyFailure(f, what, res))
}

// servingVerifyFailure is the finding of a serving certificate that does
// not verify, or of a caBundle that cannot verify any.
func servingVerifyFailure(f findingFunc, what string, res servedchain.Result) Finding {
	if res.Reason == servedchain.ReasonNoCABundle {
		return f(LevelFail, CheckServingCert, servingCertField,
			fmt.Sprintf("%s cannot be verified: %s, so kube-apiserver cannot build its client and every call fails", what, shortErr(res.Err)),
			"set the caBundle to the PEM of the CA that signs the serving certificate, or empty it to trust the system roots")
	}
	return f(LevelFail, CheckServingCert, servingCertField,
		fmt.Sprintf("%s does not verify against %s: %s", what, res.Against(), shortErr(res.Err)),
		"make the caBundle hold the CA that signs the serving certificate (kube-apiserver's calls fail TLS until then)")
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
// serving certificate and checks it with the served-chain verifier: a
// Service at <service>.<namespace>.svc and its port, as a client outside
// kube-proxy reaches it, a URL at its host and port. One that cannot be
// reached (from outside the cluster, say) is an info finding: its expiry is
// unknown. A caBundle that holds no certificate fails without a dial.
func dialServingCert(ctx context.Context, cc admv1.WebhookClientConfig, o Options, f findingFunc) []Finding {
	var e servedchain.Endpoint
	var addr string
	switch {
	case cc.URL != nil:
		e.URL = *cc.URL
		var err error
		if addr, err = e.URLAddress(); err != nil {
			return []Finding{f(LevelWarn, CheckServingCert, "", "clientConfig.url does not parse: "+err.Error(), "")}
		}
	case cc.Service != nil:
		e.Service = &servedchain.Service{Namespace: cc.Service.Namespace, Name: cc.Service.Name, Port: ptr.Deref(cc.Service.Port, servedchain.DefaultPort)}
		addr = e.Service.DNSAddress()
	default:
		return nil
	}
	chain, res := servedchain.Dialer{Timeout: o.DialTimeout}.Check(ctx, e, cc.CABundle, addr, o.Now)
	switch res.Reason {
	case servedchain.ReasonNoCABundle:
		return []Finding{servingVerifyFailure(f, "the serving certificate of "+addr, res)}
	case servedchain.ReasonUnreachable:
		return []Finding{f(LevelInfo, CheckServingCert, "", fmt.Sprintf("serving certificate expiry unknown: %s is not reachable from here (%v)", addr, shortErr(res.Err)), "")}
	case servedchain.ReasonNone, servedchain.ReasonUnknownAuthority, servedchain.ReasonExpired, servedchain.ReasonNameMismatch:
		// A chain was served: checked below.
	}
	c := servingCert{chain: chain, where: "of " + addr, renew: "renew the serving certificate of " + addr}
	return servingCertFindings(c, res, o, f)
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
