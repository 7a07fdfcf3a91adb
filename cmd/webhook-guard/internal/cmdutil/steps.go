package cmdutil

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// Steps are the three steps of a command that reads a cluster: Validate
// checks the flags alone, Complete builds what they name (the client), and
// Run does the work and prints to out.
type Steps interface {
	Validate() error
	Complete() error
	Run(ctx context.Context, out io.Writer) error
}

// RunSteps runs o's steps in order for cmd, stopping at the first error, so
// that a bad flag is reported before the cluster is reached.
func RunSteps(cmd *cobra.Command, o Steps) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := o.Complete(); err != nil {
		return err
	}
	return o.Run(cmd.Context(), cmd.OutOrStdout())
}
