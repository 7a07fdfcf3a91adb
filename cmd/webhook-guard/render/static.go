package render

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/staticmanifest"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/static"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// The files --output-dir holds: DIR/admission-configuration.yaml, and the
// manifest in DIR/static, named after the configuration it holds.
const (
	StaticConfigName = static.ConfigName
	staticFileName   = StaticConfigName + ".yaml"
	// AdmissionFileName is the AdmissionConfiguration's file in --output-dir.
	AdmissionFileName = "admission-configuration.yaml"
	// GrantFileName is the skip condition's RBAC grant in --output-dir.
	GrantFileName = "skip-grant.yaml"
)

// StaticOptions are the flags of render static-manifest.
type StaticOptions struct {
	genericiooptions.IOStreams

	url                string
	caFile             string
	source             cmdutil.ConfigSource
	failurePolicy      string
	timeoutSeconds     int32
	outputDir          string
	staticManifestsDir string
	watch              bool
	watchInterval      time.Duration
	guardSA            string
	skipGrantSA        string
	// clientCertFile and clientKeyFile are the client certificate and key
	// kube-apiserver presents to the guard (serve --client-ca-file), as
	// kube-apiserver sees them; with them a kubeconfig is written next to
	// the AdmissionConfiguration, which names it.
	clientCertFile, clientKeyFile string
}

// NewCmdStaticManifest is `render static-manifest`.
func NewCmdStaticManifest(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StaticOptions{IOStreams: streams}
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
is never locked out.

With --skip-grant-service-account, kube-apiserver decides alone the writes
whose answer is always "allowed": a writer's UPDATE of a configuration its
mapping alone owns that leaves the trust alone (caBundles, endpoints,
entries, the CA pointer, the labels a selector reads), and anyone's such
UPDATE of a named CRD or APIService. Everything else still reaches the
guard. The skip holds only while that service account (the guard's) holds
the grant for this --config's fingerprint, written to ` + GrantFileName + `
(the chart creates it): a manifest rendered from an older GuardConfig
sends every write to the guard.`,
		Example: `  # Print both files for a guard on loopback, its CA from its cert-manager Secret
  webhook-guard render static-manifest --ca-file ca.crt --config guard.yaml

  # Keep them current on a control-plane node as the certificate renews
  webhook-guard render static-manifest --ca-file /var/run/tls/ca.crt \
    --output-dir /etc/kubernetes/webhook-guard --watch`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", "https://127.0.0.1:9443"+webhook.Path, "URL kube-apiserver calls; https, reachable from the apiserver (loopback for the static shape).")
	f.StringVar(&o.caFile, "ca-file", "", "PEM CA that signed the guard's serving certificate (ca.crt of its cert-manager Secret). Required.")
	o.source.AddFileFlags(cmd, " whose breakGlass subjects are exempted by matchConditions")
	f.StringVar(&o.failurePolicy, "failure-policy", "Fail", "Fail: writes to webhook configurations are rejected while the guard is down (break-glass excepted). Ignore: they pass unguarded.")
	f.Int32Var(&o.timeoutSeconds, "timeout-seconds", 5, "How long kube-apiserver waits for the guard (1-30).")
	f.StringVar(&o.outputDir, "output-dir", "", "Write the files here instead of printing them.")
	f.StringVar(&o.staticManifestsDir, "static-manifests-dir", "", "staticManifestsDir written into the AdmissionConfiguration, as kube-apiserver sees it (default: OUTPUT-DIR/static).")
	f.BoolVar(&o.watch, "watch", false, "Keep running and re-render when the CA file or config changes (requires --output-dir).")
	f.DurationVar(&o.watchInterval, "watch-interval", 5*time.Second, "How often --watch checks the inputs.")
	f.StringVar(&o.clientCertFile, "client-cert-file", "", "Client certificate kube-apiserver presents to the guard (absolute, as kube-apiserver sees it; the guard verifies it with serve --client-ca-file). Writes "+static.KubeconfigFileName+" next to the AdmissionConfiguration, which names it. Requires --client-key-file.")
	f.StringVar(&o.clientKeyFile, "client-key-file", "", "Key of --client-cert-file (absolute, as kube-apiserver sees it).")
	f.StringVar(&o.skipGrantSA, "skip-grant-service-account", "", "The guard's service account (namespace/name). When set, kube-apiserver decides alone the writes whose answer is always allowed, while this account holds the grant for --config's fingerprint ("+GrantFileName+"). Requires --config.")
	f.StringVar(&o.guardSA, "guard-service-account", "", "The guard's service account (namespace/name). When set, the static webhook also receives writes of the policy shape's generated ValidatingAdmissionPolicies and bindings by anyone else (VAP objects are exempt from VAP, not from static webhooks), and the guard denies them.")
	return cmd
}

// Complete defaults --static-manifests-dir to OUTPUT-DIR/static, made
// absolute.
func (o *StaticOptions) Complete(_ []string) error {
	if o.outputDir != "" && o.staticManifestsDir == "" {
		abs, err := filepath.Abs(filepath.Join(o.outputDir, "static"))
		if err != nil {
			return err
		}
		o.staticManifestsDir = abs
	}
	return nil
}

// Validate checks the flags; errors name the flag.
func (o *StaticOptions) Validate() error {
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
		if _, _, ok := guardapi.SplitServiceAccount(sa); !ok {
			return fmt.Errorf("--guard-service-account must be \"namespace/name\", got %q", sa)
		}
	}
	if sa := o.skipGrantSA; sa != "" {
		if _, _, ok := guardapi.SplitServiceAccount(sa); !ok {
			return fmt.Errorf("--skip-grant-service-account must be \"namespace/name\", got %q", sa)
		}
		if o.source.File() == "" {
			return fmt.Errorf("--skip-grant-service-account requires --config: the grant names the fingerprint of that file")
		}
	}
	return o.validatePaths()
}

// validatePaths checks the paths kube-apiserver reads: they must be
// absolute, since it resolves them from its own working directory.
func (o *StaticOptions) validatePaths() error {
	if o.staticManifestsDir != "" && !filepath.IsAbs(o.staticManifestsDir) {
		return fmt.Errorf("--static-manifests-dir must be absolute (kube-apiserver requires it), got %q", o.staticManifestsDir)
	}
	if (o.clientCertFile == "") != (o.clientKeyFile == "") {
		return fmt.Errorf("--client-cert-file and --client-key-file go together: kube-apiserver needs both to present the certificate")
	}
	for _, f := range []struct{ flag, path string }{{"--client-cert-file", o.clientCertFile}, {"--client-key-file", o.clientKeyFile}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			return fmt.Errorf("%s must be absolute (kube-apiserver reads it), got %q", f.flag, f.path)
		}
	}
	return nil
}

// Run prints or writes the files once, or, with --watch, until ctx is
// done (the signal that stops the command).
func (o *StaticOptions) Run(ctx context.Context) error {
	if !o.watch {
		return o.renderOnce(ctx)
	}
	return o.watchAndRender(ctx)
}

// kubeconfigPath is where kube-apiserver finds the kubeconfig: next to the
// AdmissionConfiguration, the parent of staticManifestsDir.
func (o *StaticOptions) kubeconfigPath() string {
	if o.clientCertFile == "" {
		return ""
	}
	dir := o.staticManifestsDir
	if dir == "" {
		dir = DefaultStaticManifestsDir
	}
	return filepath.Join(filepath.Dir(filepath.Clean(dir)), static.KubeconfigFileName)
}

// kubeconfig is the kubeconfig naming the client certificate, or nil.
func (o *StaticOptions) kubeconfig() ([]byte, error) {
	if o.clientCertFile == "" {
		return nil, nil
	}
	return static.WebhookKubeconfig(o.url, o.clientCertFile, o.clientKeyFile)
}

// paths are where --output-dir's files go.
func (o *StaticOptions) paths() staticmanifest.Paths {
	return staticmanifest.Paths{
		Admission: filepath.Join(o.outputDir, AdmissionFileName),
		Grant:     filepath.Join(o.outputDir, GrantFileName),
		Manifest:  filepath.Join(o.outputDir, "static", staticFileName),
	}
}

// render reads the inputs and generates the documents.
func (o *StaticOptions) render(ctx context.Context) (staticmanifest.Rendered, error) {
	return o.generate(ctx)
}

// generate reads the inputs and generates the documents.
func (o *StaticOptions) generate(ctx context.Context) (out staticmanifest.Rendered, err error) {
	ca, err := os.ReadFile(o.caFile)
	if err != nil {
		return out, fmt.Errorf("--ca-file: %w", err)
	}
	// Checked here as well as in policy/static, to name the flag and the
	// file rather than the generator's input field.
	if _, err := cabundle.Parse(ca); err != nil {
		return out, fmt.Errorf("--ca-file %s: the data %w", o.caFile, err)
	}
	in := static.Input{
		URL:                 o.url,
		CABundle:            ca,
		FailurePolicy:       admv1.FailurePolicyType(o.failurePolicy),
		TimeoutSeconds:      o.timeoutSeconds,
		GuardServiceAccount: o.guardSA,
	}
	// The skip condition's fingerprint and writers come from one read of
	// the file, so that they can never describe two versions of it.
	cfg, raw, err := o.source.LoadWithBytes(ctx)
	if err != nil {
		return out, err
	}
	if o.skipGrantSA != "" {
		in.Skip = &static.Skip{Config: &cfg.Spec, Fingerprint: static.Fingerprint(raw), GrantServiceAccount: o.skipGrantSA}
		if out.Grant, err = skipGrantYAML(o.skipGrantSA, in.Skip.Fingerprint); err != nil {
			return out, err
		}
	}
	if cfg != nil {
		in.BreakGlass = cfg.Spec.BreakGlass
		in.TrustObjects = static.TrustObjectsOf(&cfg.Spec)
	}
	if out.Manifest, err = static.Manifest(in); err != nil {
		return out, err
	}
	dir := o.staticManifestsDir
	if dir == "" {
		dir = DefaultStaticManifestsDir
	}
	out.Admission, err = static.AdmissionConfigurationWithKubeconfig(dir, o.kubeconfigPath())
	return out, err
}

// skipGrantYAML is the grant's ClusterRole and ClusterRoleBinding as one
// file for kubectl apply.
func skipGrantYAML(sa, fingerprint string) ([]byte, error) {
	role, binding := static.SkipGrant(sa, fingerprint)
	r, err := yaml.Marshal(role)
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(binding)
	if err != nil {
		return nil, err
	}
	return slices.Concat(r, []byte("---\n"), b), nil
}

func (o *StaticOptions) renderOnce(ctx context.Context) error {
	r, err := o.render(ctx)
	if err != nil {
		return cmdutil.Invalid("%v", err)
	}
	kubeconfig, err := o.kubeconfig()
	if err != nil {
		return cmdutil.Invalid("%v", err)
	}
	if o.outputDir == "" {
		_, err := fmt.Fprintf(o.Out, "# %s: pass its path to kube-apiserver --admission-control-config-file\n%s---\n# %s: place in the staticManifestsDir\n%s",
			AdmissionFileName, r.Admission, staticFileName, r.Manifest)
		if err == nil && r.Grant != nil {
			_, err = fmt.Fprintf(o.Out, "---\n# %s: kubectl apply it (it switches the skip condition on)\n%s", GrantFileName, r.Grant)
		}
		if err == nil && kubeconfig != nil {
			_, err = fmt.Fprintf(o.Out, "---\n# %s: place at %s\n%s", static.KubeconfigFileName, o.kubeconfigPath(), kubeconfig)
		}
		return err
	}
	if err := o.writeKubeconfig(kubeconfig); err != nil {
		return err
	}
	return staticmanifest.Write(o.paths(), r)
}

// watchAndRender writes the kubeconfig, which holds only the flags'
// paths, once, and the manifest and AdmissionConfiguration whenever the
// inputs change (staticmanifest.Watch), logging to ErrOut.
func (o *StaticOptions) watchAndRender(ctx context.Context) error {
	kubeconfig, err := o.kubeconfig()
	if err != nil {
		return cmdutil.Invalid("%v", err)
	}
	if err := o.writeKubeconfig(kubeconfig); err != nil {
		return err
	}
	return staticmanifest.Watch(ctx, o.watchInterval, o.ErrOut, o.paths(), o.render)
}

// writeKubeconfig writes the kubeconfig into --output-dir, if there is one.
func (o *StaticOptions) writeKubeconfig(kubeconfig []byte) error {
	if kubeconfig == nil {
		return nil
	}
	return staticmanifest.WriteAtomic(filepath.Join(o.outputDir, static.KubeconfigFileName), kubeconfig)
}
