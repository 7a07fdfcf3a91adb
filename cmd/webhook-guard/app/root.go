// Package app is webhook-guard's root command: it wires the commands,
// each in its own package beside this one, under one cobra root.
package app

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/check"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/discover"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/cmdutil"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/render"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/review"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/scan"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/serve"
	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/test"
)

// Version is set at build time from the VERSION file.
var Version = "dev"

// Exit codes shared by the offline commands, so pipelines can gate on them.
const (
	ExitAllowed = cmdutil.ExitAllowed
	ExitDenied  = cmdutil.ExitDenied
	ExitInvalid = cmdutil.ExitInvalid
)

// LeaderElectionID names the Lease serve's replicas compete for.
const LeaderElectionID = serve.LeaderElectionID

// Main runs the command line and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	return cmdutil.Execute(NewCommand(stdout, stderr), args, stderr)
}

// NewCommand builds the root command, named after how it was invoked.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	return newCommandAs(filepath.Base(osArgs{}.Args0()), stdout, stderr)
}

// pluginName is the executable kubectl runs for `kubectl webhook-guard`
// (kubectl maps the dash in a plugin's name to an underscore in its file).
const pluginName = "kubectl-webhook_guard"

// newCommandAs builds the root command for the program name prog. As
// kubectl-webhook_guard, help shows `kubectl webhook-guard ...` (cobra's
// display name) while completion registers for kubectl-webhook_guard, the
// executable kubectl's plugin completion calls, never for kubectl itself.
func newCommandAs(prog string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "webhook-guard",
		Short: "Enforce single ownership of Kubernetes webhook configurations",
		Long: `webhook-guard rejects (enforce) or records (audit) writes to Mutating- and
ValidatingWebhookConfigurations by anyone but their declared owner, and
caBundles that do not match the owner's CA.

kube-apiserver never calls API-registered webhooks for webhook configuration
objects: the guard is reached through a static webhook manifest
('webhook-guard render static-manifest').`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if strings.TrimSuffix(prog, ".exe") == pluginName {
		root.Use = pluginName
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl webhook-guard"}
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(serve.NewCommand(Version), check.NewCommand(), render.NewCommand(), review.NewCommand(), scan.NewCommand(), discover.NewCommand(), test.NewCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "webhook-guard", Version)
			return err
		},
	}
}
