// Package app is webhook-guard's root command: it wires the commands,
// each in its own package beside this one, under one cobra root.
package app

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

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

// Main runs the command line and returns the process exit code. The
// signals are handled here, once for every command: the first SIGINT or
// SIGTERM ends the context the commands run with.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := cmdutil.SignalContext(context.Background())
	defer stop()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: stdout, ErrOut: stderr}
	return cmdutil.Execute(newCommandAs(ctx, filepath.Base(osArgs{}.Args0()), streams), args, stderr)
}

// NewCommand builds the root command, named after how it was invoked, for
// a caller that only lists or inspects the commands.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: stdout, ErrOut: stderr}
	return newCommandAs(context.Background(), filepath.Base(osArgs{}.Args0()), streams)
}

// pluginName is the executable kubectl runs for `kubectl webhook-guard`
// (kubectl maps the dash in a plugin's name to an underscore in its file).
const pluginName = "kubectl-webhook_guard"

// newCommandAs builds the root command for the program name prog. As
// kubectl-webhook_guard, help shows `kubectl webhook-guard ...` (cobra's
// display name) while completion registers for kubectl-webhook_guard, the
// executable kubectl's plugin completion calls, never for kubectl itself.
func newCommandAs(ctx context.Context, prog string, streams genericiooptions.IOStreams) *cobra.Command {
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
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	// Every command, listed once.
	root.AddCommand(
		serve.NewCmdServe(ctx, streams, Version),
		check.NewCmdCheck(ctx, streams),
		render.NewCmdRender(ctx, streams),
		review.NewCmdReview(ctx, streams),
		scan.NewCmdScan(ctx, streams),
		discover.NewCmdDiscover(ctx, streams),
		test.NewCmdTest(ctx, streams),
		NewCmdVersion(ctx, streams),
	)
	return root
}
