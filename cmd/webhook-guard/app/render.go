package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// Names of the rendered static webhook.
const (
	StaticConfigName  = "webhook-guard.static.k8s.io"
	StaticWebhookName = "guard.webhook-guard.io"
	// StaticBreakGlassWebhookName receives only break-glass subjects' writes,
	// with failurePolicy Ignore.
	StaticBreakGlassWebhookName = "break-glass.webhook-guard.io"
	// StaticPolicyObjectsWebhookName receives writes of policy mode's
	// generated ValidatingAdmissionPolicies and bindings by anyone but the
	// guard and break-glass (--guard-service-account).
	StaticPolicyObjectsWebhookName = "policy-objects.webhook-guard.io"
	staticFileName                 = StaticConfigName + ".yaml"
	admissionFileName              = "admission-configuration.yaml"
)

type renderStaticOptions struct {
	url                string
	caFile             string
	source             configSource
	failurePolicy      string
	timeoutSeconds     int32
	outputDir          string
	staticManifestsDir string
	watch              bool
	watchInterval      time.Duration
	guardSA            string
}

func newRenderCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Render the manifests that connect kube-apiserver to the guard",
	}
	cmd.AddCommand(newRenderStaticCommand(), newRenderAdmissionConfigCommand(), newRenderPolicyCommand())
	return cmd
}

func newRenderStaticCommand() *cobra.Command {
	o := &renderStaticOptions{}
	cmd := &cobra.Command{
		Use:   "static-manifest --url https://127.0.0.1:9443/validate --ca-file ca.crt [--config guard.yaml] [--output-dir DIR]",
		Short: "Render the static ValidatingWebhookConfiguration and the AdmissionConfiguration that loads it",
		Long: `kube-apiserver never calls API-registered webhooks for webhook configuration
objects, but it does call static webhooks: a ValidatingWebhookConfiguration
file named *.static.k8s.io in the staticManifestsDir of the
ValidatingAdmissionWebhook plugin (Kubernetes 1.37 beta, on by default; 1.36
alpha behind the ManifestBasedAdmissionControlConfig gate).

This renders that file and the AdmissionConfiguration for
--admission-control-config-file. With --output-dir it writes
DIR/admission-configuration.yaml and DIR/static/` + staticFileName + ` (atomically);
otherwise it prints both. With --watch it re-renders whenever the CA file
changes, so the manifest follows the guard's certificate renewals.

failurePolicy Fail (the default) rejects writes to webhook configurations
while the guard is unreachable. Break-glass subjects from --config are sent
to a second webhook entry with failurePolicy Ignore (matchConditions, CEL
evaluated inside kube-apiserver): while the guard is up their writes are
warned about and recorded, while it is down they pass, so an administrator
is never locked out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return invalid("%v", err)
			}
			if !o.watch {
				return o.renderOnce(cmd.OutOrStdout())
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return o.watchAndRender(ctx, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", "https://127.0.0.1:9443"+webhook.Path, "URL kube-apiserver calls; https, reachable from the apiserver (loopback for the static shape).")
	f.StringVar(&o.caFile, "ca-file", "", "PEM CA that signed the guard's serving certificate (ca.crt of its cert-manager Secret). Required.")
	o.source.addFiles(cmd, " whose breakGlass subjects are exempted by matchConditions")
	f.StringVar(&o.failurePolicy, "failure-policy", "Fail", "Fail: writes to webhook configurations are rejected while the guard is down (break-glass excepted). Ignore: they pass unguarded.")
	f.Int32Var(&o.timeoutSeconds, "timeout-seconds", 5, "How long kube-apiserver waits for the guard (1-30).")
	f.StringVar(&o.outputDir, "output-dir", "", "Write the files here instead of printing them.")
	f.StringVar(&o.staticManifestsDir, "static-manifests-dir", "", "staticManifestsDir written into the AdmissionConfiguration, as kube-apiserver sees it (default: OUTPUT-DIR/static).")
	f.BoolVar(&o.watch, "watch", false, "Keep running and re-render when the CA file or config changes (requires --output-dir).")
	f.DurationVar(&o.watchInterval, "watch-interval", 5*time.Second, "How often --watch checks the inputs.")
	f.StringVar(&o.guardSA, "guard-service-account", "", "The guard's service account (namespace/name). When set, the static webhook also receives writes of policy mode's generated ValidatingAdmissionPolicies and bindings by anyone else (VAP objects are exempt from VAP, not from static webhooks), and the guard denies them.")
	return cmd
}

func (o *renderStaticOptions) validate() error {
	if o.caFile == "" {
		return fmt.Errorf("--ca-file is required: the CA of the guard's serving certificate")
	}
	if len(o.url) < 8 || o.url[:8] != "https://" {
		return fmt.Errorf("--url must be an https URL, got %q", o.url)
	}
	if o.failurePolicy != "Fail" && o.failurePolicy != "Ignore" {
		return fmt.Errorf("--failure-policy must be Fail or Ignore, got %q", o.failurePolicy)
	}
	if o.timeoutSeconds < 1 || o.timeoutSeconds > 30 {
		return fmt.Errorf("--timeout-seconds must be in 1..30, got %d", o.timeoutSeconds)
	}
	if o.watch && o.outputDir == "" {
		return fmt.Errorf("--watch requires --output-dir")
	}
	if sa := o.guardSA; sa != "" {
		if _, _, ok := policy.SplitServiceAccount(sa); !ok {
			return fmt.Errorf("--guard-service-account must be \"namespace/name\", got %q", sa)
		}
	}
	if o.outputDir != "" && o.staticManifestsDir == "" {
		abs, err := filepath.Abs(filepath.Join(o.outputDir, "static"))
		if err != nil {
			return err
		}
		o.staticManifestsDir = abs
	}
	if o.staticManifestsDir != "" && !filepath.IsAbs(o.staticManifestsDir) {
		return fmt.Errorf("--static-manifests-dir must be absolute (kube-apiserver requires it), got %q", o.staticManifestsDir)
	}
	return nil
}

// render builds both documents.
func (o *renderStaticOptions) render() (static, admission []byte, err error) {
	ca, err := os.ReadFile(o.caFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--ca-file: %w", err)
	}
	if _, err := policy.ParseBundle(ca); err != nil {
		return nil, nil, fmt.Errorf("--ca-file %s: the data %w", o.caFile, err)
	}
	var breakGlass policy.Subjects
	cfg, err := o.source.load(context.Background(), nil)
	if err != nil {
		return nil, nil, err
	}
	if cfg != nil {
		breakGlass = cfg.Spec.BreakGlass
	}
	vwc := StaticWebhook(o.url, ca, breakGlass, o.failurePolicy, o.timeoutSeconds)
	if o.guardSA != "" {
		ProtectPolicyObjects(vwc, o.guardSA, breakGlass)
	}
	static, err = yaml.Marshal(vwc)
	if err != nil {
		return nil, nil, err
	}
	dir := o.staticManifestsDir
	if dir == "" {
		dir = DefaultStaticManifestsDir
	}
	admission, err = yaml.Marshal(AdmissionConfiguration(dir))
	return static, admission, err
}

func (o *renderStaticOptions) renderOnce(out io.Writer) error {
	static, admission, err := o.render()
	if err != nil {
		return invalid("%v", err)
	}
	if o.outputDir == "" {
		_, err := fmt.Fprintf(out, "# %s: pass its path to kube-apiserver --admission-control-config-file\n%s---\n# %s: place in the staticManifestsDir\n%s",
			admissionFileName, admission, staticFileName, static)
		return err
	}
	if err := writeAtomic(filepath.Join(o.outputDir, admissionFileName), admission); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(o.outputDir, "static", staticFileName), static)
}

// watchAndRender re-renders when an input changes. The static manifest is
// replaced by rename, which kube-apiserver picks up within ~0.1 s; a render
// that fails leaves the previous file in place.
func (o *renderStaticOptions) watchAndRender(ctx context.Context, log io.Writer) error {
	var last []byte
	tick := time.NewTicker(o.watchInterval)
	defer tick.Stop()
	for {
		static, admission, err := o.render()
		switch {
		case err != nil:
			fmt.Fprintf(log, "render failed, keeping the previous files: %v\n", err)
		case !bytes.Equal(static, last):
			if err := writeAtomic(filepath.Join(o.outputDir, admissionFileName), admission); err != nil {
				fmt.Fprintf(log, "write failed: %v\n", err)
				break
			}
			if err := writeAtomic(filepath.Join(o.outputDir, "static", staticFileName), static); err != nil {
				fmt.Fprintf(log, "write failed: %v\n", err)
				break
			}
			last = static
			fmt.Fprintf(log, "rendered %s\n", filepath.Join(o.outputDir, "static", staticFileName))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// StaticWebhook is the static ValidatingWebhookConfiguration.
func StaticWebhook(url string, ca []byte, breakGlass policy.Subjects, failurePolicy string, timeoutSeconds int32) *admissionregistrationv1.ValidatingWebhookConfiguration {
	fp := admissionregistrationv1.FailurePolicyType(failurePolicy)
	sideEffects := admissionregistrationv1.SideEffectClassNoneOnDryRun
	matchPolicy := admissionregistrationv1.Equivalent
	scope := admissionregistrationv1.ClusterScope
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   StaticConfigName,
			Labels: map[string]string{"app.kubernetes.io/name": "webhook-guard", "app.kubernetes.io/managed-by": "webhook-guard-render"},
		},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    StaticWebhookName,
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{"admissionregistration.k8s.io"},
					APIVersions: []string{"v1"},
					Resources:   []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"},
					Scope:       &scope,
				},
			}},
			FailurePolicy:  &fp,
			MatchPolicy:    &matchPolicy,
			SideEffects:    &sideEffects,
			TimeoutSeconds: &timeoutSeconds,
		}},
	}
	if expr, ok := vap.SubjectsExpression(breakGlass); ok {
		vwc.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-break-glass", Expression: "!(" + expr + ")"}}
		// Break-glass writes still reach the guard, through a second entry
		// that fails open: while the guard is up they are warned about and
		// recorded; while it is down they pass. That is how "always allowed,
		// always recorded" and "never locked out by a guard outage" both hold.
		bg := vwc.Webhooks[0]
		bg.Name = StaticBreakGlassWebhookName
		ignore := admissionregistrationv1.Ignore
		bg.FailurePolicy = &ignore
		bg.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "break-glass", Expression: expr}}
		vwc.Webhooks = append(vwc.Webhooks, bg)
	}
	return vwc
}

// ProtectPolicyObjects adds the entry that lets only the guard change the
// objects policy mode generates. ValidatingAdmissionPolicies and their
// bindings are exempt from ValidatingAdmissionPolicy but not from static
// webhooks: where the static webhook is installed, deleting a generated
// binding (the way to switch policy mode off) is a guarded write like any
// other. The objectSelector (evaluated on the old and the new object) sends
// only objects labelled app.kubernetes.io/managed-by=webhook-guard, and
// matchConditions skip the guard's own writes and break-glass subjects, so
// kube-apiserver calls the guard only for the writes it denies. The param
// ConfigMaps are not routed here: ConfigMaps are not exempt from VAP, and
// policy mode generates a policy protecting them (policy/vap
// ProtectParamsName), with no call out of kube-apiserver.
func ProtectPolicyObjects(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, guardSA string, breakGlass policy.Subjects) {
	e := vwc.Webhooks[0]
	e.Name = StaticPolicyObjectsWebhookName
	scope := admissionregistrationv1.ClusterScope
	e.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
		Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{"admissionregistration.k8s.io"},
			APIVersions: []string{"v1"},
			Resources:   []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"},
			Scope:       &scope,
		},
	}}
	e.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{vap.LabelManagedBy: vap.ManagedBy}}
	e.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-the-guard", Expression: "request.userInfo.username != " + vap.CELString(policy.ServiceAccountUsername(guardSA))}}
	if expr, ok := vap.SubjectsExpression(breakGlass); ok {
		e.MatchConditions = append(e.MatchConditions, admissionregistrationv1.MatchCondition{Name: "not-break-glass", Expression: "!(" + expr + ")"})
	}
	vwc.Webhooks = append(vwc.Webhooks, e)
}

// AdmissionConfiguration points the ValidatingAdmissionWebhook plugin at
// the static manifests directory. kubeConfigFile stays empty: the static
// webhook carries its own URL and CA.
func AdmissionConfiguration(staticManifestsDir string) map[string]any {
	return map[string]any{
		"apiVersion": "apiserver.config.k8s.io/v1",
		"kind":       "AdmissionConfiguration",
		"plugins": []any{map[string]any{
			"name": "ValidatingAdmissionWebhook",
			"configuration": map[string]any{
				"apiVersion":         "apiserver.config.k8s.io/v1",
				"kind":               "WebhookAdmissionConfiguration",
				"kubeConfigFile":     "",
				"staticManifestsDir": staticManifestsDir,
			},
		}},
	}
}

// writeAtomic writes via a temporary file and rename, so a reader (the
// apiserver's file watcher) never sees a half-written file.
func writeAtomic(path string, data []byte) error {
	// kube-apiserver (often another user than this process) must read the
	// manifest; it holds only a URL and a public CA certificate.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // see above
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone after the rename; cleans up on error
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil { //nolint:gosec // readable by kube-apiserver, see above
		return err
	}
	return os.Rename(tmp.Name(), path)
}
