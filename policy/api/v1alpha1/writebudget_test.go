package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// Test_validateWriteBudget: the budget is optional; when set, perMinute is
// between 1 and MaxWriteBudgetPerMinute, with the exact messages below.
func Test_validateWriteBudget(t *testing.T) {
	tests := map[string]struct {
		budget string
		exp    []string
	}{
		"unset, no limit":   {budget: ""},
		"1 a minute":        {budget: "writeBudget: {perMinute: 1}"},
		"the maximum":       {budget: "writeBudget: {perMinute: 6000}"},
		"perMinute omitted": {budget: "writeBudget: {}", exp: []string{"owners[0].writeBudget.perMinute: Invalid value: 0: must be >= 1; omit writeBudget for no limit"}},
		"negative":          {budget: "writeBudget: {perMinute: -3}", exp: []string{"owners[0].writeBudget.perMinute: Invalid value: -3: must be >= 1; omit writeBudget for no limit"}},
		"above the maximum": {budget: "writeBudget: {perMinute: 6001}", exp: []string{"owners[0].writeBudget.perMinute: Invalid value: 6001: must be <= 6000 (100 writes a second); omit writeBudget for no limit"}},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			doc := `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
- name: app
  match: {validating: [app-webhook]}
  writers: {serviceAccounts: [app/controller]}
  ca: {secret: {namespace: app, name: app-ca}}
  ` + test.budget + "\n"
			var spec GuardConfig
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &spec))
			SetDefaults(&spec)
			var got []string
			for _, err := range Validate(&spec) {
				got = append(got, err.Error())
			}
			assert.Equal(t, test.exp, got)
		})
	}
}
