package e2e

// The command line on CRD conversion webhooks and APIServices: review,
// scan and discover show the two kinds as they show webhook
// configurations.

import (
	"slices"
	"strings"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

const (
	cliCRD = "gizmos.cli.e2e.webhook-guard.io"
	// cliAPISvc serves another group than the CRD's: kube-apiserver makes
	// a local APIService (v1.cli.e2e...) for the CRD's own.
	cliAPISvc = "v1." + cliGroup
	cliGroup  = "metrics.cli.e2e.webhook-guard.io"
	// absentCRD is named by the mapping and never created.
	absentCRD = "absents.cli.e2e.webhook-guard.io"
)

// TestTrustObjectsCLI: with a mapping naming a CRD and an APIService
// (static shape, enforce), the intruder's caBundle writes to both are
// denied and `review` lists the denials, read from kube-apiserver's audit
// log, under crd/ and apiservice/;
// `scan --config` reports the mapped objects, the named CRD that does not
// exist, and the APIService whose Service does not exist as failing its
// whole API group; `discover` proposes one mapping holding both objects
// (their cert-manager inject annotation is the evidence).
func TestTrustObjectsCLI(t *testing.T) {
	t.Parallel()
	owner := guardapi.Owner{
		Name:    widgetsMapping,
		Mode:    guardapi.ModeEnforce,
		Match:   guardapi.Match{CustomResourceDefinitions: []string{cliCRD, absentCRD}, APIServices: []string{cliAPISvc}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      caFromSecret(),
	}
	cfg := guardConfig(owner)
	f := newFixture(t, framework.Options{Config: cfg, ReportCRDs: true, AuditLog: true})
	ctx := t.Context()
	inject := map[string]string{cmapi.WantInjectAnnotation: appNamespace + "/app-webhook-cert"}
	for _, kind := range []framework.Kind{framework.CRD, framework.APIService} {
		name := cliCRD
		if kind == framework.APIService {
			name = cliAPISvc
		}
		f.admin.MustCreate(t, framework.Spec{Kind: kind, Name: name, Annotations: inject, Bundles: [][]byte{f.ownerCA.PEM}})
		foreign := framework.NewCA(t, "intruder-ca").PEM
		// kube-apiserver writes a new CRD's status right after the create:
		// retry the read-modify-write on a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			_, err := f.intruder.SetCABundle(ctx, kind, name, foreign)
			return err
		})
		requireDenied(t, err, `(mapping "widgets", enforce)`, "not-owner")
	}
	kubeconfig := f.env.Kubeconfig(t, envtest.User{Name: "e2e-cli", Groups: []string{"system:masters"}})

	t.Run("review lists the denials of both kinds", func(t *testing.T) {
		out, code := cli(t, "review", "-o", "wide", "--mapping", widgetsMapping, "--audit-log", f.env.AuditLogPath(t), "--kubeconfig", kubeconfig)
		t.Logf("webhook-guard review -o wide --audit-log:\n%s", out)
		if code != 1 {
			t.Errorf("review exited %d; want 1 (denials listed)", code)
		}
		intruder := "sa:" + intruderNamespace + ":" + intruderSA
		for _, ref := range []string{"crd/" + cliCRD, "apiservice/" + cliAPISvc} {
			if !slices.ContainsFunc(strings.Split(out, "\n"), func(row string) bool {
				return strings.Contains(row, ref) && strings.Contains(row, intruder) && strings.Contains(row, "not-owner") && strings.Contains(row, "deny (audit-log)")
			}) {
				t.Errorf("review has no row of %s's not-owner denial of %s", intruder, ref)
			}
		}
	})

	t.Run("scan reports the mapped objects, the missing CRD and the APIService's absent Service", func(t *testing.T) {
		out, code := cli(t, "scan", "-o", "json", "--dial-timeout", "500ms", "--config", writeGuardConfig(t, t.TempDir(), cfg), "--kubeconfig", kubeconfig)
		if code != 1 {
			t.Fatalf("scan exited %d; want 1 (problems found):\n%s", code, out)
		}
		var res struct {
			Findings []struct{ Level, Check, Mapping, Configuration, Field, Detail string } `json:"findings"`
		}
		if err := yaml.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("scan -o json: %v\n%s", err, out)
		}
		want := []struct{ level, check, mapping, config, field, detail string }{
			{"warn", "missing-configuration", widgetsMapping, "CustomResourceDefinition/" + absentCRD, "", "does not exist"},
			{"fail", "no-ready-endpoints", "", "APIService/" + cliAPISvc, "spec.service", "the whole API group " + cliGroup + " fails: discovery and every request of it"},
			// The conversion webhook's URL and the APIService's Service
			// are not reachable from the test: the mapped objects' serving
			// certificates are reported unknown.
			{"info", "serving-cert", widgetsMapping, "CustomResourceDefinition/" + cliCRD, "", "not reachable"},
			{"info", "serving-cert", widgetsMapping, "APIService/" + cliAPISvc, "", "not reachable"},
		}
	next:
		for _, w := range want {
			for _, got := range res.Findings {
				if got.Level == w.level && got.Check == w.check && got.Mapping == w.mapping && got.Configuration == w.config && got.Field == w.field && strings.Contains(got.Detail, w.detail) {
					continue next
				}
			}
			t.Errorf("scan lacks %+v:\n%s", w, out)
		}
		for _, got := range res.Findings {
			if got.Check == "ca-mismatch" || got.Check == "ca-empty" || got.Check == "unmapped" && strings.Contains(got.Configuration, "cli.e2e.webhook-guard.io") {
				t.Errorf("unexpected finding %+v: the denied writes left the owner's CA in place", got)
			}
		}
	})

	t.Run("discover proposes a mapping holding both objects", func(t *testing.T) {
		out, code := cli(t, "discover", "--format", "config", "--kubeconfig", kubeconfig)
		if code != 0 {
			t.Fatalf("discover exited %d:\n%s", code, out)
		}
		proposal, err := policy.Load([]byte(out))
		if err != nil {
			t.Fatalf("the proposal does not load: %v\n%s", err, out)
		}
		for _, o := range proposal.Spec.Owners {
			if strings.Join(o.Match.CustomResourceDefinitions, ",") == cliCRD && strings.Join(o.Match.APIServices, ",") == cliAPISvc {
				if o.CA.InjectedByCertManager == nil {
					t.Errorf("mapping %s: ca is %+v; want injectedByCertManager (the objects' inject annotation)", o.Name, o.CA)
				}
				for _, want := range []string{"CustomResourceDefinition/" + cliCRD + ": annotation " + cmapi.WantInjectAnnotation, "APIService/" + cliAPISvc + ": the APIService calls Service default/e2e-absent"} {
					if !strings.Contains(out, want) {
						t.Errorf("the proposal's evidence lacks %q", want)
					}
				}
				return
			}
		}
		t.Errorf("no proposed mapping holds exactly %s and %s:\n%s", cliCRD, cliAPISvc, out)
	})
}
