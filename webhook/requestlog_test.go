package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Test_Handler_logLines: the request's fields reach the log lines a
// review writes although they are joined to the logger only when a line is
// written; an allowed review writes nothing at the default level and one
// line at debug.
func Test_Handler_logLines(t *testing.T) {
	review := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(samples, "reviews", name))
		require.NoError(t, err)
		return data
	}
	tests := map[string]struct {
		review    string
		verbosity int
		want      []string // substrings of the one expected line; nil: no line
	}{
		"if a review is denied, log the request and the decision": {
			review: "intruder.json",
			want:   []string{`"msg"="deny"`, `"kind"="MutatingWebhookConfiguration"`, `"operation"="UPDATE"`, `"requestID"=`, `"user"=`, `"mapping"="koordinator"`, `"rule"="not-owner"`, `"message"=`},
		},
		"if a review is allowed, log nothing at the default level": {
			review: "owner.json",
		},
		"if a review is allowed at debug level, log it with the request and the decision": {
			review: "owner.json", verbosity: 1,
			want: []string{`"msg"="allowed"`, `"kind"="ValidatingWebhookConfiguration"`, `"requestID"=`, `"mapping"="koordinator"`, `"decision"="allow"`},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var lines []string
			h := sampleHandler(t, "guard-koordinator.yaml")
			h.Log = funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: test.verbosity})
			post(t, h, "application/json", review(test.review))
			if test.want == nil {
				assert.Empty(t, lines)
				return
			}
			require.Len(t, lines, 1, strings.Join(lines, "\n"))
			for _, s := range test.want {
				assert.Contains(t, lines[0], s)
			}
		})
	}
}
