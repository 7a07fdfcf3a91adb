package scan

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// testCA is a self-signed CA in PEM, valid for the year up to notAfter.
func testCA(t *testing.T, cn string, notAfter time.Time) []byte {
	t.Helper()
	ca, err := testpki.NewCA(cn, testpki.WithValidity(notAfter.Add(-365*24*time.Hour), notAfter))
	require.NoError(t, err)
	return ca.PEM
}

func vwc(name string, bundle []byte, managers ...string) *admv1.ValidatingWebhookConfiguration {
	none := admv1.SideEffectClassNone
	o := &admv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admv1.ValidatingWebhook{{
			Name: "w0.example.com", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admv1.WebhookClientConfig{CABundle: bundle},
		}},
	}
	for _, m := range managers {
		o.ManagedFields = append(o.ManagedFields, metav1.ManagedFieldsEntry{
			Manager: m, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "admissionregistration.k8s.io/v1", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:webhooks":{"k:{\"name\":\"w0.example.com\"}":{"f:clientConfig":{"f:caBundle":{}}}}}`),
		})
	}
	return o
}

// Test_scan prepares a cluster with every problem scan looks for and
// checks each is found, and that a clean cluster exits 0.
func Test_scan(t *testing.T) {
	now := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	ownerCA := testCA(t, "owner", now.Add(10*24*time.Hour))
	foreignCA := testCA(t, "foreign", now.Add(365*24*time.Hour))
	owner := func(name string, names ...string) guardapi.Owner {
		return guardapi.Owner{Name: name, Match: guardapi.Match{Validating: names},
			Writers: guardapi.Subjects{ServiceAccounts: []string{"app/ctrl"}},
			CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "app", Name: "ca", Key: "ca.crt"}}}
	}
	load := func(owners ...guardapi.Owner) *policy.Mappings {
		cfg, err := policy.Load(mustYAML(t, &guardapi.GuardConfig{TypeMeta: metav1.TypeMeta{APIVersion: guardapi.APIVersion, Kind: guardapi.Kind}, Owners: owners}))
		require.NoError(t, err)
		return cfg
	}
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ca"}, Data: map[string][]byte{"ca.crt": ownerCA}}

	t.Run("if the cluster has every problem, find each and exit 1", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret,
			vwc("mismatched", foreignCA),
			vwc("two-writers", ownerCA, "app-controller", "cainjector"),
			vwc("stray", foreignCA),
		).Build()
		cfg := load(owner("a", "mismatched", "absent"), owner("b", "two-writers"))
		var out bytes.Buffer
		err := run(t, c, cfg, Options{Output: cmdutil.OutputFlags{Format: "json"}, ExpiryThreshold: 30 * 24 * time.Hour, DialTimeout: time.Second, Now: now}, &out)
		var ee *cmdutil.ExitError
		require.True(t, errors.As(err, &ee), "err = %v", err)
		assert.Equal(t, cmdutil.ExitDenied, ee.Code)
		for _, want := range []string{
			`"check": "ca-mismatch"`, `"configuration": "ValidatingWebhookConfiguration/mismatched"`,
			`"check": "ca-expiry"`, `expires at 2026-12-10T05:00:00Z, in 10d (under the 30d threshold)`,
			`"check": "unmapped"`, `"configuration": "ValidatingWebhookConfiguration/stray"`,
			`"check": "missing-configuration"`, `"configuration": "ValidatingWebhookConfiguration/absent"`,
		} {
			assert.Contains(t, out.String(), want)
		}
	})

	t.Run("if an output is asked for, print the findings in it as review does", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret, vwc("mismatched", foreignCA), vwc("stray", foreignCA)).Build()
		cfg := load(owner("a", "mismatched"))
		scan := func(format string, noHeaders bool) string {
			var out bytes.Buffer
			err := run(t, c, cfg, Options{Output: cmdutil.OutputFlags{Format: format, NoHeaders: noHeaders}, ExpiryThreshold: time.Hour, DialTimeout: time.Second, Now: now}, &out)
			var ee *cmdutil.ExitError
			require.True(t, errors.As(err, &ee) && ee.Code == cmdutil.ExitDenied, "-o %s: err = %v", format, err)
			return out.String()
		}
		table := scan("table", false)
		assert.Contains(t, table, "LEVEL")
		assert.NotContains(t, table, "WEBHOOK", "the webhook column is wide only")
		assert.Contains(t, table, "Suggestions:")
		wide := scan("wide", false)
		assert.Contains(t, wide, "WEBHOOK")
		assert.Contains(t, wide, "w0.example.com")
		assert.Contains(t, wide, "FIX")
		rows := scan("table", true)
		assert.NotContains(t, rows, "LEVEL")
		assert.NotContains(t, rows, "Suggestions:")
		assert.Len(t, strings.Split(strings.TrimSpace(rows), "\n"), strings.Count(table, "ValidatingWebhookConfiguration/"))
		assert.Equal(t, "validatingwebhookconfiguration.admissionregistration.k8s.io/mismatched\nvalidatingwebhookconfiguration.admissionregistration.k8s.io/stray\n", scan("name", false))
		assert.Equal(t, "ca-mismatch unmapped", scan(`jsonpath={.findings[?(@.level!="info")].check} {.findings[?(@.level=="info")].check}`, false))
	})

	t.Run("if every guarded configuration holds the owner's valid CA, exit 0", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(secret, vwc("fine", ownerCA, "app-controller")).Build()
		var out bytes.Buffer
		err := run(t, c, load(owner("a", "fine")), Options{Output: cmdutil.OutputFlags{Format: "table"}, ExpiryThreshold: 24 * time.Hour, DialTimeout: time.Second, Now: now}, &out)
		require.NoError(t, err, out.String())
		assert.Equal(t, "No findings.\n", out.String())
	})
}

// run runs scan over a client and a GuardConfig as the command does after
// Complete.
func run(t *testing.T, c client.Client, cfg *policy.Mappings, o Options, out io.Writer) error {
	t.Helper()
	require.NoError(t, o.Validate())
	o.Client, o.Config, o.Out = c, cfg, out
	return o.Run(t.Context())
}

func mustYAML(t *testing.T, c *guardapi.GuardConfig) []byte {
	t.Helper()
	b, err := yaml.Marshal(c)
	require.NoError(t, err)
	return b
}
