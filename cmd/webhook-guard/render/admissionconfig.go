package render

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/policy/static"
)

// DefaultStaticManifestsDir is where the install recipes (config/recipes)
// and the chart's staticManifestSync put the static webhook manifest on a
// control-plane node: <hostPath>/static with the chart's default hostPath.
const DefaultStaticManifestsDir = "/etc/kubernetes/webhook-guard/static"

// AdmissionConfigOptions are the flags of render admission-config.
type AdmissionConfigOptions struct {
	genericiooptions.IOStreams

	// StaticManifestsDir is written into the AdmissionConfiguration.
	StaticManifestsDir string
}

// NewCmdAdmissionConfig is `render admission-config`.
func NewCmdAdmissionConfig(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &AdmissionConfigOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "admission-config [--static-manifests-dir DIR]",
		Short: "Render the AdmissionConfiguration for --admission-control-config-file alone (no CA needed)",
		Long: `Renders the AdmissionConfiguration that points kube-apiserver's
ValidatingAdmissionWebhook plugin at a static manifests directory. It does not
depend on the guard's CA, so it can be written before the cluster exists, which
is when kind and kubeadm read it. The directory must exist when kube-apiserver
starts (it may be empty); the static manifest itself is written there later by
"render static-manifest" or the chart's staticManifestSync sidecar.

The output is byte-for-byte the admission-configuration.yaml that
"render static-manifest --output-dir" writes for the same directory.`,
		Example: `  # Before the cluster exists: the file kubeadm's or kind's kube-apiserver reads
  webhook-guard render admission-config > admission-configuration.yaml

  # For a static manifests directory elsewhere on the node
  webhook-guard render admission-config --static-manifests-dir /etc/kubernetes/admission/static`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
	cmd.Flags().StringVar(&o.StaticManifestsDir, "static-manifests-dir", DefaultStaticManifestsDir, "staticManifestsDir written into the AdmissionConfiguration, as kube-apiserver sees it.")
	return cmd
}

// Complete has nothing to derive: the flag is the whole input.
func (o *AdmissionConfigOptions) Complete(_ []string) error { return nil }

// Validate checks that the directory is absolute, as kube-apiserver needs.
func (o *AdmissionConfigOptions) Validate() error {
	if !filepath.IsAbs(o.StaticManifestsDir) {
		return cmdutil.Invalid("--static-manifests-dir must be absolute (kube-apiserver requires it), got %q", o.StaticManifestsDir)
	}
	return nil
}

// Run prints the AdmissionConfiguration.
func (o *AdmissionConfigOptions) Run(_ context.Context) error {
	out, err := static.AdmissionConfiguration(o.StaticManifestsDir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(o.Out, string(out))
	return err
}
