// Package cmdutil holds what webhook-guard's commands share: their shape
// and runner, the exit codes, the signals, the output flags, kubectl's
// cluster flags and the GuardConfig source flags.
package cmdutil

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes shared by the offline commands, so pipelines can gate on them.
const (
	ExitAllowed = 0
	ExitDenied  = 1
	ExitInvalid = 2
)

// ExitError carries an exit code out of a command; a nil Err prints
// nothing.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Invalid is an error of invalid input: exit 2.
func Invalid(format string, args ...any) error {
	return &ExitError{Code: ExitInvalid, Err: fmt.Errorf(format, args...)}
}

// Denied is exit 1 without a message: the output says why.
func Denied() error { return &ExitError{Code: ExitDenied} }

// Execute runs cmd with args and returns the process exit code, printing
// the error, if any, to stderr. An error without an exit code is exit 2.
func Execute(cmd *cobra.Command, args []string, stderr io.Writer) int {
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetErr(stderr)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return ExitAllowed
	}
	if ee, ok := errors.AsType[*ExitError](err); ok {
		if ee.Err != nil {
			fmt.Fprintln(stderr, "error:", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintln(stderr, "error:", err)
	return ExitInvalid
}
