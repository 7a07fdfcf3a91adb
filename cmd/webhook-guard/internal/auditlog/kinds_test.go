package auditlog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/static"
)

// Test_Read_everyKind walks guardapi.Kinds: the static shape's denial of a
// write of each kind's resource is read under the kind. A kind whose
// resource the reader does not know is skipped as no write of the guard's,
// and fails here.
func Test_Read_everyKind(t *testing.T) {
	for _, k := range guardapi.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			line := fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":"update",`+
				`"user":{"username":"intruder"},"objectRef":{"resource":%q,"name":%q},"responseStatus":{"metadata":{},"code":403},`+
				`"stageTimestamp":"2026-11-30T04:00:00.000000Z","annotations":{"%[3]s/decision":"deny","%[3]s/mapping":"example","%[3]s/rule":"not-owner"}}`,
				k.Resource, k.ExampleName(), static.WebhookName)
			found, _, err := Read(strings.NewReader(line))
			require.NoError(t, err)
			if assert.Len(t, found, 1) {
				assert.Equal(t, k.Kind+"/"+k.ExampleName(), found[0].Configuration)
			}
		})
	}
}
