package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
)

// VersionOptions are version's (no) flags.
type VersionOptions struct {
	genericiooptions.IOStreams
}

// NewCmdVersion is `webhook-guard version`.
func NewCmdVersion(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	o := &VersionOptions{IOStreams: streams}
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Example: `  # The version of the binary (or of the kubectl plugin)
  webhook-guard version`,
		Args: cobra.NoArgs,
		RunE: cmdutil.Runner(ctx, o),
	}
}

// Complete has nothing to derive.
func (o *VersionOptions) Complete(_ []string) error { return nil }

// Validate has no flag to check.
func (o *VersionOptions) Validate() error { return nil }

// Run prints the version set at build time.
func (o *VersionOptions) Run(_ context.Context) error {
	_, err := fmt.Fprintln(o.Out, "webhook-guard", Version)
	return err
}
