// Package app holds webhook-guard's commands.
package app

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// Version is set at build time from the VERSION file.
var Version = "dev"

// Exit codes shared by the offline commands, so pipelines can gate on them.
const (
	ExitAllowed = 0
	ExitDenied  = 1
	ExitInvalid = 2
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func invalid(format string, args ...any) error {
	return &exitError{code: ExitInvalid, err: fmt.Errorf(format, args...)}
}

// Main runs the command line and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	cmd := NewCommand(stdout, stderr)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "error:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "error:", err)
	return ExitInvalid
}

// NewCommand builds the root command. Invoked as kubectl-webhook_guard it
// works as a kubectl plugin (`kubectl webhook-guard check ...`).
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	name := "webhook-guard"
	root := &cobra.Command{
		Use:   name,
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
	if strings.HasPrefix(filepath.Base(osArgs{}.Args0()), "kubectl-") {
		root.Use = "kubectl webhook-guard"
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newServeCommand(), newCheckCommand(), newRenderCommand(), newReviewCommand(), newScanCommand(), newDiscoverCommand(), newVersionCommand())
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
