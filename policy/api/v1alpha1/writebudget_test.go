package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
			assert.Equal(t, test.exp, ownerErrors(t, test.budget))
		})
	}
}
