package app

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func Test_newCommandAs(t *testing.T) {
	tests := map[string]struct {
		prog, usage, complete string
	}{
		"if invoked as the kubectl plugin, help says kubectl webhook-guard and completion registers the plugin's executable": {
			prog: "kubectl-webhook_guard", usage: "kubectl webhook-guard review [", complete: "complete -o default -F __start_kubectl-webhook_guard kubectl-webhook_guard\n",
		},
		"if invoked as webhook-guard, help and completion say webhook-guard": {
			prog: "webhook-guard", usage: "\n  webhook-guard review [", complete: "complete -o default -F __start_webhook-guard webhook-guard\n",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var help, completion, stderr bytes.Buffer
			cmd := newCommandAs(t.Context(), test.prog, genericiooptions.IOStreams{Out: &help, ErrOut: &stderr})
			cmd.SetArgs([]string{"review", "--help"})
			require.NoError(t, cmd.Execute())
			assert.Contains(t, help.String(), test.usage)

			cmd = newCommandAs(t.Context(), test.prog, genericiooptions.IOStreams{Out: &completion, ErrOut: &stderr})
			cmd.SetArgs([]string{"completion", "bash"})
			require.NoError(t, cmd.Execute())
			assert.Contains(t, completion.String(), test.complete)
			assert.NotContains(t, completion.String(), " kubectl\n", "completion must never register for kubectl itself")
		})
	}
}
