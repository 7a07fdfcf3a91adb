package v1alpha1

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Test_validateVerifyServing: unset means warn; only warn and deny are
// accepted, and the error lists them.
func Test_validateVerifyServing(t *testing.T) {
	tests := map[string]struct {
		value string
		exp   []string
	}{
		"unset, warn": {value: ""},
		"warn":        {value: "verifyServing: warn"},
		"deny":        {value: "verifyServing: deny"},
		"misspelled":  {value: "verifyServing: Deny", exp: []string{`owners[0].verifyServing: Unsupported value: "Deny": supported values: "warn", "deny"`}},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, ownerErrors(t, test.value))
		})
	}
}
