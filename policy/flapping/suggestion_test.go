package flapping

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/webhook-guard/webhook-guard/policy"
)

func Test_Suggestion(t *testing.T) {
	tests := map[string]struct {
		facts policy.FindingFacts
		exp   string
	}{
		"if the writers are known, name them and ask them to share one CA": {
			facts: policy.FindingFacts{Mapping: "app", Configuration: "ValidatingWebhookConfiguration/app-webhooks", Writers: "system:serviceaccount:app-system:controller"},
			exp:   "caBundle flapping: distinct CAs written by system:serviceaccount:app-system:controller; replicas each generating their own CA fight over ValidatingWebhookConfiguration/app-webhooks: make them share one CA (owners[app].ca) and let one writer inject it",
		},
		"if the writers are not known, say so with a dash": {
			facts: policy.FindingFacts{Mapping: "app", Configuration: "ValidatingWebhookConfiguration/app-webhooks"},
			exp:   "caBundle flapping: distinct CAs written by -; replicas each generating their own CA fight over ValidatingWebhookConfiguration/app-webhooks: make them share one CA (owners[app].ca) and let one writer inject it",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, Suggestion(test.facts))
		})
	}
}
