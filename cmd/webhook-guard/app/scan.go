package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/discovery"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

type scanOptions struct {
	kube            kubeFlags
	source          configSource
	expiryThreshold time.Duration
	dialTimeout     time.Duration
	policyAnchor    string
	out             outputFlags
}

func newScanCommand() *cobra.Command {
	o := &scanOptions{}
	cmd := &cobra.Command{
		Use:   "scan [--config guard.yaml] [--expiry-threshold 720h] [-o table|wide|json|yaml|name|jsonpath=TEMPLATE]",
		Short: "Check the live cluster's webhooks' health and, with --config, the owner mappings",
		Long: `Check the health of every webhook in the cluster: a Service with no ready
endpoints behind failurePolicy Fail, a serving certificate (read from the
Secret the workload behind the Service mounts) that does not verify against
the caBundle or expires within --expiry-threshold, failurePolicy Fail on
rules that catch kube-system, kube-node-lease or the webhook's own namespace,
timeoutSeconds above 10, sideEffects Unknown or Some, and a caBundle written
by more than one field manager. Each finding names the field and the fix.

With --config, also compare every webhook configuration with the owner mappings:
each guarded configuration's caBundle against the owner's CA, the owner's CA
and the webhook's serving certificate expiry, the field managers of caBundle
(more than one is a second CA writer), configurations no mapping covers, and
mappings that name configurations that do not exist.

The serving certificate is read by dialing clientConfig.url or the service
(<name>.<namespace>.svc:<port>) with --dial-timeout; when it cannot be
reached (for instance from outside the cluster) its expiry is reported as
unknown.

Exit codes: 0 nothing to fix (info findings only), 1 a warn or fail finding,
2 invalid input or the cluster could not be read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.out.validate(); err != nil {
				return err
			}
			if o.expiryThreshold <= 0 || o.dialTimeout <= 0 {
				return invalid("--expiry-threshold and --dial-timeout must be > 0")
			}
			cfg, err := o.source.load(cmd.Context(), &o.kube)
			if err != nil {
				return err
			}
			c, err := o.kube.client()
			if err != nil {
				return invalid("%v", err)
			}
			return runScan(cmd.Context(), c, cfg, o, time.Now(), cmd.OutOrStdout())
		},
	}
	o.kube.add(cmd)
	o.source.add(cmd, "; without a GuardConfig only the health checks run")
	cmd.Flags().DurationVar(&o.expiryThreshold, "expiry-threshold", 30*24*time.Hour, "Warn when the owner's CA or a serving certificate expires within this duration.")
	cmd.Flags().DurationVar(&o.dialTimeout, "dial-timeout", 2*time.Second, "Timeout of one TLS dial to a webhook to read its serving certificate.")
	cmd.Flags().StringVar(&o.policyAnchor, "policy-anchor", "", "Policy shape: the anchor ClusterRole (the chart's <release>-webhook-guard-policy-anchor); a fail finding when it is missing.")
	o.out.add(cmd)
	return cmd
}

// Scan finding levels.
const (
	LevelFail = "fail"
	LevelWarn = "warn"
	LevelInfo = "info"
)

// Scan checks.
const (
	CheckCAMismatch       = "ca-mismatch"
	CheckCAUnavailable    = "ca-unavailable"
	CheckCAEmpty          = "ca-empty"
	CheckCAExpiry         = "ca-expiry"
	CheckServingCert      = "serving-cert"
	CheckUnmapped         = "unmapped"
	CheckMissing          = "missing-configuration"
	CheckAmbiguousMapping = "ambiguous-owner"
)

// ScanFinding is one problem (or fact) found in the cluster.
type ScanFinding struct {
	Level         string `json:"level"`
	Check         string `json:"check"`
	Mapping       string `json:"mapping,omitempty"`
	Configuration string `json:"configuration"`
	Webhook       string `json:"webhook,omitempty"`
	// Field is the field to change, e.g. webhooks[0].timeoutSeconds.
	Field      string `json:"field,omitempty"`
	Detail     string `json:"detail"`
	Suggestion string `json:"suggestion,omitempty"`
}

// ScanResult is the whole scan, as -o json|yaml prints it.
type ScanResult struct {
	Findings []ScanFinding `json:"findings"`
	// Problems counts warn and fail findings.
	Problems int `json:"problems"`
}

// scanTarget is one webhook configuration, either kind.
type scanTarget struct {
	kind     policy.ConfigKind
	meta     metav1.ObjectMeta
	webhooks []scanWebhook
}

type scanWebhook struct {
	name   string
	client admv1.WebhookClientConfig
}

func (s scanTarget) ref() string { return string(s.kind) + "/" + s.meta.Name }

func runScan(ctx context.Context, c client.Client, cfg *policy.Mappings, o *scanOptions, now time.Time, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	res := ScanResult{Findings: []ScanFinding{}}
	caInjector := guardapi.DefaultCAInjectorServiceAccount
	if cfg != nil {
		caInjector = cfg.Spec.CertManager.CAInjectorServiceAccount
	}
	configs, cluster, err := gatherEvidence(ctx, c, caInjector)
	if err != nil {
		return &exitError{code: ExitInvalid, err: err}
	}
	for _, f := range discovery.Health(configs, cluster, discovery.HealthOptions{Now: now, ExpiryThreshold: o.expiryThreshold}) {
		res.Findings = append(res.Findings, ScanFinding{Level: f.Level, Check: f.Check, Configuration: f.Configuration, Webhook: f.Webhook, Field: f.Field, Detail: f.Detail, Suggestion: f.Fix})
	}
	if cfg != nil {
		if err := scanMappings(ctx, c, cfg, o, now, &res); err != nil {
			return err
		}
	}
	anchor, err := scanAnchor(ctx, c, o.policyAnchor)
	if err != nil {
		return &exitError{code: ExitInvalid, err: err}
	}
	res.Findings = append(res.Findings, anchor...)
	return finishScan(res, o, out)
}

// scanMappings compares the configurations with the owner mappings.
func scanMappings(ctx context.Context, c client.Client, cfg *policy.Mappings, o *scanOptions, now time.Time, res *ScanResult) error {
	targets, err := listTargets(ctx, c)
	if err != nil {
		return &exitError{code: ExitInvalid, err: fmt.Errorf("list webhook configurations: %w", err)}
	}
	s := &scanner{cfg: cfg, opts: o, now: now, resolver: casource.New(c, casource.Options{})}
	seen := map[policy.ConfigKind]map[string]bool{policy.KindValidating: {}, policy.KindMutating: {}}
	for _, t := range targets {
		seen[t.kind][t.meta.Name] = true
		res.Findings = append(res.Findings, s.scan(ctx, t)...)
	}
	for _, ow := range cfg.Spec.Owners {
		for kind, names := range map[policy.ConfigKind][]string{policy.KindValidating: ow.Match.Validating, policy.KindMutating: ow.Match.Mutating} {
			for _, n := range names {
				if !seen[kind][n] {
					res.Findings = append(res.Findings, ScanFinding{
						Level: LevelWarn, Check: CheckMissing, Mapping: ow.Name, Configuration: string(kind) + "/" + n,
						Detail:     "the mapping names a configuration that does not exist",
						Suggestion: fmt.Sprintf("remove it from owners[%s].match, or check that the owner is installed (a typo in the name leaves the real configuration unguarded)", ow.Name),
					})
				}
			}
		}
	}
	return nil
}

// finishScan sorts, counts and prints the findings; any warn or fail
// finding exits 1.
func finishScan(res ScanResult, o *scanOptions, out io.Writer) error {
	var err error
	levelRank := map[string]int{LevelFail: 0, LevelWarn: 1, LevelInfo: 2}
	slices.SortFunc(res.Findings, func(a, b ScanFinding) int {
		if d := levelRank[a.Level] - levelRank[b.Level]; d != 0 {
			return d
		}
		return slices.Compare([]string{a.Mapping, a.Configuration, a.Check, a.Webhook, a.Field, a.Detail}, []string{b.Mapping, b.Configuration, b.Check, b.Webhook, b.Field, b.Detail})
	})
	for _, f := range res.Findings {
		if f.Level != LevelInfo {
			res.Problems++
		}
	}
	if err = printScan(out, &o.out, res); err != nil {
		return err
	}
	if res.Problems > 0 {
		return &exitError{code: ExitDenied}
	}
	return nil
}

func listTargets(ctx context.Context, c client.Reader) ([]scanTarget, error) {
	var out []scanTarget
	var vs admv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &vs); err != nil {
		return nil, err
	}
	for _, v := range vs.Items {
		t := scanTarget{kind: policy.KindValidating, meta: v.ObjectMeta}
		for _, w := range v.Webhooks {
			t.webhooks = append(t.webhooks, scanWebhook{w.Name, w.ClientConfig})
		}
		out = append(out, t)
	}
	var ms admv1.MutatingWebhookConfigurationList
	if err := c.List(ctx, &ms); err != nil {
		return nil, err
	}
	for _, m := range ms.Items {
		t := scanTarget{kind: policy.KindMutating, meta: m.ObjectMeta}
		for _, w := range m.Webhooks {
			t.webhooks = append(t.webhooks, scanWebhook{w.Name, w.ClientConfig})
		}
		out = append(out, t)
	}
	return out, nil
}

type scanner struct {
	cfg      *policy.Mappings
	opts     *scanOptions
	now      time.Time
	resolver *casource.Resolver
}

func (s *scanner) scan(ctx context.Context, t scanTarget) []ScanFinding {
	m := s.cfg.Match(t.kind, t.meta.Name, t.meta.Labels)
	if len(m.Conflicting) > 0 {
		return []ScanFinding{{Level: LevelFail, Check: CheckAmbiguousMapping, Mapping: strings.Join(m.Conflicting, ","), Configuration: t.ref(),
			Detail: "the label selectors of several mappings match it", Suggestion: "narrow all but one of the label selectors"}}
	}
	if m.Owner == nil {
		return []ScanFinding{{Level: LevelInfo, Check: CheckUnmapped, Configuration: t.ref(), Detail: "no mapping covers this configuration",
			Suggestion: "add it to the match of the mapping of the controller that owns it (or keep it unguarded on purpose)"}}
	}
	finding := func(level, check, webhook, detail, suggestion string) ScanFinding {
		return ScanFinding{Level: level, Check: check, Mapping: m.Owner.Name, Configuration: t.ref(), Webhook: webhook, Detail: detail, Suggestion: suggestion}
	}
	var out []ScanFinding
	ca := s.resolver.Resolve(ctx, casource.Request{Owner: m.Owner, Annotations: t.meta.Annotations, ClusterResourceNamespace: s.cfg.Spec.CertManager.ClusterResourceNamespace}, true)
	if ca.Err != nil {
		out = append(out, finding(LevelFail, CheckCAUnavailable, "", ca.Err.Error(), fmt.Sprintf("fix owners[%s].ca or the permissions to read it", m.Owner.Name)))
	} else {
		out = append(out, s.expiry(finding, "", "the owner's CA ("+ca.Source+")", ca.Set.NotAfter(), fmt.Sprintf("renew the owner's CA (owners[%s].ca)", m.Owner.Name))...)
	}
	for _, w := range t.webhooks {
		bundle := w.client.CABundle
		if len(bundle) == 0 {
			out = append(out, finding(LevelWarn, CheckCAEmpty, w.name, "the caBundle is empty: kube-apiserver verifies the webhook with its own trust store",
				"let the owner (or cainjector) write the owner's CA"))
		} else if ca.Err == nil {
			fps, err := cabundle.Parse(bundle)
			var foreign []string
			for _, fp := range fps {
				if !ca.Set.Contains(fp) {
					foreign = append(foreign, fp.Short())
				}
			}
			switch {
			case err != nil:
				out = append(out, finding(LevelFail, CheckCAMismatch, w.name, "the caBundle "+err.Error(), "rewrite it with the owner's CA"))
			case len(foreign) > 0:
				out = append(out, finding(LevelFail, CheckCAMismatch, w.name,
					fmt.Sprintf("the caBundle holds CA %s, not in the owner's CA set %s", strings.Join(foreign, ","), strings.Join(ca.Set.Short(), ",")),
					"find who wrote it (managedFields, the guard's review) and make it use the owner's CA, or fix owners["+m.Owner.Name+"].ca"))
			}
		}
		out = append(out, s.servingCert(ctx, finding, w)...)
	}
	return out
}

func (s *scanner) expiry(finding func(level, check, webhook, detail, suggestion string) ScanFinding, webhook, what string, notAfter time.Time, fix string) []ScanFinding {
	if notAfter.IsZero() {
		return nil
	}
	left := notAfter.Sub(s.now)
	check := CheckCAExpiry
	if webhook != "" {
		check = CheckServingCert
	}
	switch {
	case left <= 0:
		return []ScanFinding{finding(LevelFail, check, webhook, fmt.Sprintf("%s expired at %s", what, notAfter.UTC().Format(time.RFC3339)), fix)}
	case left < s.opts.expiryThreshold:
		return []ScanFinding{finding(LevelWarn, check, webhook, fmt.Sprintf("%s expires at %s, in %s (under the %s threshold)", what,
			notAfter.UTC().Format(time.RFC3339), roundDays(left), roundDays(s.opts.expiryThreshold)), fix)}
	}
	return nil
}

func roundDays(d time.Duration) string {
	if d >= 48*time.Hour {
		return strconv.Itoa(int(d.Hours()/24)) + "d"
	}
	return d.Round(time.Minute).String()
}

// servingCert dials the webhook (bounded by --dial-timeout) and checks its
// certificate's expiry and that it chains to the caBundle.
func (s *scanner) servingCert(ctx context.Context, finding func(level, check, webhook, detail, suggestion string) ScanFinding, w scanWebhook) []ScanFinding {
	addr, serverName := "", ""
	switch {
	case w.client.URL != nil:
		u, err := url.Parse(*w.client.URL)
		if err != nil {
			return []ScanFinding{finding(LevelWarn, CheckServingCert, w.name, "clientConfig.url does not parse: "+err.Error(), "")}
		}
		port := u.Port()
		if port == "" {
			port = "443"
		}
		addr, serverName = net.JoinHostPort(u.Hostname(), port), u.Hostname()
	case w.client.Service != nil:
		port := int32(443)
		if w.client.Service.Port != nil {
			port = *w.client.Service.Port
		}
		serverName = w.client.Service.Name + "." + w.client.Service.Namespace + ".svc"
		addr = net.JoinHostPort(serverName, strconv.Itoa(int(port)))
	default:
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, s.opts.dialTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{ServerName: serverName, InsecureSkipVerify: true}} //nolint:gosec // only reads the certificate; verified below against the caBundle
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return []ScanFinding{finding(LevelInfo, CheckServingCert, w.name, fmt.Sprintf("serving certificate expiry unknown: %s is not reachable from here (%v)", addr, shortErr(err)), "")}
	}
	defer func() { _ = conn.Close() }()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil
	}
	leaf := certs[0]
	out := s.expiry(finding, w.name, "the serving certificate of "+addr, leaf.NotAfter, "renew the webhook's serving certificate")
	if len(w.client.CABundle) > 0 {
		roots := x509.NewCertPool()
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		if roots.AppendCertsFromPEM(w.client.CABundle) {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: serverName, CurrentTime: s.now}); err != nil {
				out = append(out, finding(LevelFail, CheckServingCert, w.name, "the serving certificate does not verify against the caBundle: "+shortErr(err),
					"kube-apiserver's calls to this webhook fail TLS: make the caBundle and the serving certificate come from the same CA"))
			}
		}
	}
	return out
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// caBundleManagers are the field managers that own a caBundle field of any
// webhooks[] entry, sorted.
func caBundleManagers(mfs []metav1.ManagedFieldsEntry) []string {
	set := map[string]struct{}{}
	for _, mf := range mfs {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		whs, _ := fields["f:webhooks"].(map[string]any)
		for _, entry := range whs {
			e, _ := entry.(map[string]any)
			cc, _ := e["f:clientConfig"].(map[string]any)
			if _, ok := cc["f:caBundle"]; ok {
				set[mf.Manager] = struct{}{}
			}
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// printScan prints the findings in the output vocabulary of review: a
// table (wide adds the webhook entry and each finding's fix) followed by
// the suggestions and the problem count, or json, yaml, jsonpath, or the
// configurations with findings as kubectl -o name spells them.
func printScan(out io.Writer, o *outputFlags, res ScanResult) error {
	if !o.isTable() {
		names := make([]string, 0, len(res.Findings))
		for _, f := range res.Findings {
			names = append(names, configurationName(f.Configuration))
		}
		return o.print(out, res, nil, names)
	}
	if len(res.Findings) == 0 {
		if o.noHeaders {
			return nil
		}
		_, err := fmt.Fprintln(out, "No findings.")
		return err
	}
	if err := o.print(out, res, scanTable(res), nil); err != nil {
		return err
	}
	if o.noHeaders {
		return nil
	}
	var sugg []string
	for _, f := range res.Findings {
		if f.Suggestion != "" && f.Level != LevelInfo && !slices.Contains(sugg, f.Suggestion) {
			sugg = append(sugg, f.Suggestion)
		}
	}
	if len(sugg) > 0 {
		fmt.Fprintln(out, "\nSuggestions:")
		for _, s := range sugg {
			fmt.Fprintf(out, "  - %s\n", s)
		}
	}
	_, err := fmt.Fprintf(out, "\n%d problem(s) (warn or fail).\n", res.Problems)
	return err
}

// scanTable is the findings table; -o wide adds the webhook entry and the
// fix of each finding.
func scanTable(res ScanResult) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("LEVEL", false), column("CHECK", false), column("MAPPING", false), column("CONFIGURATION", false),
		column("FIELD", false), column("DETAIL", false), column("WEBHOOK", true), column("FIX", true),
	}}
	for _, f := range res.Findings {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{
			f.Level, f.Check, orDash(f.Mapping), f.Configuration, orDash(f.Field), f.Detail, orDash(f.Webhook), orDash(f.Suggestion),
		}})
	}
	return t
}

// configurationName is "Kind/name" as kubectl -o name prints it
// (validatingwebhookconfiguration.admissionregistration.k8s.io/name).
func configurationName(c string) string {
	kind, name, ok := strings.Cut(c, "/")
	if !ok {
		return c
	}
	return strings.ToLower(kind) + ".admissionregistration.k8s.io/" + name
}
