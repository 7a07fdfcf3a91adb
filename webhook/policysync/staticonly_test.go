package policysync

import (
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/policy"
)

// Test_Syncer_warnStaticOnly: a mapping's writeBudget and verifyServing:
// deny, which the policy shape cannot apply, are logged once, not at every
// pass; verifyServing: warn is not logged (the default does nothing to
// miss).
func Test_Syncer_warnStaticOnly(t *testing.T) {
	cfg, err := policy.Load([]byte(`apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
- name: app
  match: {validating: [app]}
  writers: {serviceAccounts: [app/controller]}
  ca: {secret: {namespace: app, name: ca}}
  writeBudget: {perMinute: 30}
  verifyServing: deny
- name: other
  match: {validating: [other]}
  writers: {serviceAccounts: [other/controller]}
  ca: {secret: {namespace: other, name: ca}}
  verifyServing: warn
`))
	require.NoError(t, err)
	var lines []string
	s := &Syncer{Log: funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})}
	s.init()
	s.warnStaticOnly(cfg)
	s.warnStaticOnly(cfg)
	assert.Equal(t, []string{
		`"level"=0 "msg"="policy shape: writeBudget is not applied (the generated policies keep no state across requests); run the static shape to limit caBundle writes" "mapping"="app" "perMinute"=30`,
		`"level"=0 "msg"="policy shape: verifyServing: deny is not applied (the generated policies see no probe); the probe series still report what each endpoint serves" "mapping"="app"`,
	}, lines)
}
