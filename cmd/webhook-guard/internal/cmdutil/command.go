package cmdutil

import (
	"context"

	"github.com/spf13/cobra"
)

// Command is the shape of every command's options, as kubectl's and
// cmctl's: the package's NewCmd function (ctx and the IOStreams first)
// builds the cobra command around them, and Runner calls the steps in this
// order. cmd/webhook-guard's shape test holds every command to it.
type Command interface {
	// Complete derives what the flags and arguments imply (defaults,
	// paths, the clock); it reads no file and reaches no cluster, so that
	// Validate reports a bad flag before anything is read.
	Complete(args []string) error
	// Validate checks the flags alone; its errors name the flag.
	Validate() error
	// Run reads what the flags name, does the work and prints to the
	// IOStreams; ExitError carries a verdict's exit code.
	Run(ctx context.Context) error
}

// Runner is every command's RunE: o's steps in order, stopping at the
// first error. Execute, the one place errors become exit codes, reports
// it.
func Runner(ctx context.Context, o Command) func(*cobra.Command, []string) error {
	return func(_ *cobra.Command, args []string) error {
		if err := o.Complete(args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(ctx)
	}
}
