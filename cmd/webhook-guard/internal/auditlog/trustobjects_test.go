package auditlog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/policy/static"
)

// Test_Read_trustObjects: decisions about CRDs and APIServices, of either
// shape, are read under the objects' kinds.
func Test_Read_trustObjects(t *testing.T) {
	event := func(resource, name, annotations string) string {
		return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":"update",`+
			`"user":{"username":"system:serviceaccount:other:intruder"},"objectRef":{"resource":%q,"name":%q},`+
			`"responseStatus":{"metadata":{},"code":403},"stageTimestamp":"2026-11-30T04:00:00.000000Z","annotations":{%s}}`, resource, name, annotations)
	}
	staticDeny := fmt.Sprintf(`"%[1]s/decision":"deny","%[1]s/mapping":"widgets","%[1]s/rule":"not-owner",`+
		`"%[1]s/violations":"not-owner: spec.conversion.webhook.clientConfig.caBundle: not a writer"`, static.WebhookName)
	policyAudit := `"validation.policy.admission.k8s.io/validation_failure":"[{\"message\":\"webhook-guard (audit) would deny UPDATE of APIService \\\"v1.metrics.example.com\\\" ` +
		`by \\\"system:serviceaccount:other:intruder\\\" (mapping \\\"widgets\\\", audit, policy shape); not-owner: userInfo\",\"policy\":\"webhook-guard-widgets-apiservices\",\"validationActions\":[\"Audit\"]}]"`
	log := strings.Join([]string{
		event("customresourcedefinitions", "widgets.example.com", staticDeny),
		event("apiservices", "v1.metrics.example.com", policyAudit),
	}, "\n")
	found, _, err := Read(strings.NewReader(log))
	require.NoError(t, err)
	at := "2026-11-30T04:00:00Z"
	assert.ElementsMatch(t, []Decision{
		{Mapping: "widgets", Subject: "system:serviceaccount:other:intruder", Rule: "not-owner", Decision: "deny",
			Configuration: "CustomResourceDefinition/widgets.example.com", Count: 1, FirstSeen: at, LastSeen: at},
		{Mapping: "widgets", Subject: "system:serviceaccount:other:intruder", Rule: "not-owner", Decision: "audit",
			Configuration: "APIService/v1.metrics.example.com", Count: 1, FirstSeen: at, LastSeen: at},
	}, found)
}
