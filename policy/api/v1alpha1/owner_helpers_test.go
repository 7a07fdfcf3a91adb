package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// ownerErrors validates a GuardConfig of one valid mapping with line added
// to it (at the mapping's indentation), and returns the errors' texts.
func ownerErrors(t *testing.T, line string) []string {
	t.Helper()
	doc := `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
- name: app
  match: {validating: [app-webhook]}
  writers: {serviceAccounts: [app/controller]}
  ca: {secret: {namespace: app, name: app-ca}}
  ` + line + "\n"
	var spec GuardConfig
	require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &spec))
	SetDefaults(&spec)
	var got []string
	for _, err := range Validate(&spec) {
		got = append(got, err.Error())
	}
	return got
}
