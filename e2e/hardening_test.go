package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// standaloneConfig owns "soaked" with an inline CA: deciding needs no API
// reads, so the guard runs without a control plane.
func standaloneConfig(ca *framework.CA) *guardapi.GuardConfig {
	o := mapping(enforcedMapping, guardapi.ModeEnforce, "soaked", guardapi.CASource{PEM: string(ca.PEM)})
	return &guardapi.GuardConfig{DefaultMode: guardapi.ModeAudit, BreakGlass: guardapi.Subjects{Groups: []string{"system:masters"}},
		Unmanaged: guardapi.UnmanagedAllow, Owners: []guardapi.Owner{o}}
}

// reviewBody is an AdmissionReview: user UPDATEs the "soaked"
// ValidatingWebhookConfiguration to carry bundle.
func reviewBody(uid, user string, bundle, old []byte) []byte {
	obj := func(b []byte) map[string]any {
		return map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
			"metadata": map[string]any{"name": "soaked"},
			"webhooks": []any{map[string]any{"name": "w.soak.io", "clientConfig": map[string]any{"caBundle": b, "url": "https://x.example/"},
				"sideEffects": "None", "admissionReviewVersions": []string{"v1"}}}}
	}
	r := map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": map[string]any{
		"uid": uid, "kind": map[string]string{"group": "admissionregistration.k8s.io", "version": "v1", "kind": "ValidatingWebhookConfiguration"},
		"resource": map[string]string{"group": "admissionregistration.k8s.io", "version": "v1", "resource": "validatingwebhookconfigurations"},
		"name":     "soaked", "operation": "UPDATE", "userInfo": map[string]any{"username": user},
		"object": obj(bundle), "oldObject": obj(old)}}
	out, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return out
}

type verdict struct {
	Response struct {
		UID     string `json:"uid"`
		Allowed bool   `json:"allowed"`
		Status  *struct {
			Code    int32  `json:"code"`
			Message string `json:"message"`
		} `json:"status"`
	} `json:"response"`
}

func clientTLS(ca *framework.CA) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func post(c *http.Client, url string, body []byte) (verdict, error) {
	var v verdict
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return v, err
	}
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("HTTP %s: %s", resp.Status, data)
	}
	return v, json.Unmarshal(data, &v)
}

// TestGracefulShutdownDrainsInFlightReview: the real binary gets SIGTERM
// while a review is in flight (its body half sent); it stops accepting new
// connections but answers the in-flight review in full, then exits 0.
func TestGracefulShutdownDrainsInFlightReview(t *testing.T) {
	ownerCA := framework.NewCA(t, "owner-ca")
	g, servingCA := framework.NewStandaloneGuard(t, standaloneConfig(ownerCA))
	g.Start(t)

	body := reviewBody("drain-1", "system:serviceaccount:"+appNamespace+":"+ownerSA, ownerCA.PEM, ownerCA.PEM)
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", g.Port), clientTLS(servingCA)) // HTTP/1.1: no ALPN
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	half := len(body) / 2
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", framework.WebhookPath, len(body))
	if _, err := conn.Write(body[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the server is reading the body
	sigterm := time.Now()
	g.Signal(t, syscall.SIGTERM)
	framework.Eventually(t, 5*time.Second, "the guard logs that it drains", func() bool {
		return strings.Contains(g.Log.String(), "draining in-flight admission reviews")
	})
	// New connections are refused while the in-flight review drains.
	if c, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", g.Port), clientTLS(servingCA)); err == nil {
		c.Close()
		t.Errorf("a new connection was accepted after SIGTERM")
	}
	time.Sleep(2 * time.Second) // a slow client: the review is still in flight
	if _, exited := g.WaitExit(0); exited {
		t.Fatalf("the guard exited with a review in flight\n%s", g.Log.Tail(20))
	}
	if _, err := conn.Write(body[half:]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the in-flight review got no answer: %v\n%s", err, g.Log.Tail(20))
	}
	defer resp.Body.Close()
	var v verdict
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !v.Response.Allowed || v.Response.UID != "drain-1" {
		t.Fatalf("the in-flight review was not answered in full: HTTP %d %+v", resp.StatusCode, v.Response)
	}
	code, exited := g.WaitExit(10 * time.Second)
	if !exited || code != 0 {
		t.Fatalf("after draining, the guard should exit 0 (exited %v, code %d)\n%s", exited, code, g.Log.Tail(20))
	}
	t.Logf("in-flight review answered in full %s after SIGTERM; the guard then exited 0", time.Since(sigterm).Round(time.Millisecond))
}

// TestSoak serves a steady request rate from the real binary (allowed,
// denied and malformed reviews; one request in 50 on a fresh TLS
// connection) and compares goroutines and heap at start and end, scraped
// from the guard's own /metrics. SOAK_DURATION (default 20s; `make soak`
// runs 10m) sets the length; SOAK_RATE (default 50/s) the rate.
func TestSoak(t *testing.T) {
	duration := 20 * time.Second
	if d := os.Getenv("SOAK_DURATION"); d != "" {
		var err error
		if duration, err = time.ParseDuration(d); err != nil {
			t.Fatalf("SOAK_DURATION: %v", err)
		}
	}
	rate := 50
	if r := os.Getenv("SOAK_RATE"); r != "" {
		rate, _ = strconv.Atoi(r)
	}
	ownerCA, foreignCA := framework.NewCA(t, "owner-ca"), framework.NewCA(t, "foreign-ca")
	g, servingCA := framework.NewStandaloneGuard(t, standaloneConfig(ownerCA))
	g.Start(t)
	url := g.URL()
	owner := "system:serviceaccount:" + appNamespace + ":" + ownerSA
	keepAlive := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(servingCA), ForceAttemptHTTP2: true}}
	defer keepAlive.CloseIdleConnections()

	var sent, failed, wrong atomic.Int64
	send := func(i int) {
		c := keepAlive
		if i%50 == 0 {
			tr := &http.Transport{TLSClientConfig: clientTLS(servingCA), DisableKeepAlives: true}
			c = &http.Client{Timeout: 10 * time.Second, Transport: tr}
			defer tr.CloseIdleConnections()
		}
		uid := fmt.Sprintf("soak-%d", i)
		var body []byte
		expAllowed := false
		switch i % 4 {
		case 0, 1:
			body, expAllowed = reviewBody(uid, owner, ownerCA.PEM, ownerCA.PEM), true
		case 2:
			body = reviewBody(uid, owner, foreignCA.PEM, ownerCA.PEM)
		default:
			body = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"` + uid + `"`)
		}
		sent.Add(1)
		v, err := post(c, url, body)
		switch {
		case err != nil:
			failed.Add(1)
		case v.Response.Allowed != expAllowed:
			wrong.Add(1)
		}
	}
	run := func(d time.Duration, from int) int {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		end := time.Now().Add(d)
		i := from
		for time.Now().Before(end) {
			<-tick.C
			go send(i)
			i++
		}
		return i
	}
	sample := func() (goroutines, heapMiB float64) {
		m := g.Metrics(t)
		return m.Sum("go_goroutines", nil), m.Sum("go_memstats_heap_alloc_bytes", nil) / (1 << 20)
	}
	settle := func() {
		time.Sleep(1500 * time.Millisecond) // in-flight requests finish, fresh connections close
		keepAlive.CloseIdleConnections()
		time.Sleep(500 * time.Millisecond)
	}

	// Warm up (connections, caches, the first GC cycles), then measure.
	n := run(3*time.Second, 0)
	settle()
	g0, h0 := sample()
	start := time.Now()
	run(duration, n)
	settle()
	g1, h1 := sample()
	served := g.Metric(t, "controller_runtime_webhook_requests_total", nil)
	t.Logf("soak: %s at %d req/s: %d requests sent, %.0f served (controller_runtime_webhook_requests_total), %d transport errors, %d wrong verdicts; goroutines %.0f -> %.0f; heap %.1f MiB -> %.1f MiB",
		time.Since(start).Round(time.Second), rate, sent.Load(), served, failed.Load(), wrong.Load(), g0, g1, h0, h1)
	if failed.Load() > 0 || wrong.Load() > 0 {
		t.Errorf("%d requests failed and %d got a wrong verdict", failed.Load(), wrong.Load())
	}
	if int64(served) < sent.Load() {
		t.Errorf("served %.0f of %d requests", served, sent.Load())
	}
	// A handful of goroutines may come and go (GC workers, the cert
	// watcher's poll); a leak per request or connection would be hundreds.
	if g1 > g0+5 {
		t.Errorf("goroutines grew from %.0f to %.0f", g0, g1)
	}
	// Heap between GCs swings by a few MiB; a per-request leak at this rate
	// would be tens of MiB.
	if h1 > h0+16 {
		t.Errorf("heap grew from %.1f MiB to %.1f MiB", h0, h1)
	}
}
