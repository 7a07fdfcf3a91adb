package vapname

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

func Test_Targets(t *testing.T) {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	tests := map[string]struct {
		match guardapi.Match
		exp   []Target
	}{
		"if the mapping names configurations, one policy matches them by name": {
			match: guardapi.Match{Validating: []string{"x"}},
			exp:   []Target{{Name: "webhook-guard-app"}},
		},
		"if the mapping has a selector only, one policy matches by it": {
			match: guardapi.Match{LabelSelector: selector},
			exp:   []Target{{Name: "webhook-guard-app", BySelector: true}},
		},
		"if the mapping has both, the selector's policy is the -selected one": {
			match: guardapi.Match{Mutating: []string{"x"}, LabelSelector: selector},
			exp:   []Target{{Name: "webhook-guard-app"}, {Name: "webhook-guard-app-selected", BySelector: true}},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, Targets(&guardapi.Owner{Name: "app", Match: test.match}))
		})
	}
}

func Test_AllForMapping(t *testing.T) {
	assert.Equal(t, []string{"webhook-guard-app", "webhook-guard-app-selected", "webhook-guard-app-ca", "webhook-guard-app-selected-ca", "webhook-guard-app-crds", "webhook-guard-app-crds-ca", "webhook-guard-app-apiservices", "webhook-guard-app-apiservices-ca"}, AllForMapping("app"))
	assert.Equal(t, "webhook-guard-app-ca", CAPolicy(ForMapping("app")))
}
