package webhook

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// A confirmed ca-mismatch is remembered against the owner's CA set it was
// foreign to: the same set answers "recent", any other set does not.
func Test_confirmedMismatches_keyedByOwnerCASet(t *testing.T) {
	f := testFixtures(t)
	set := func(pems ...[]byte) cabundle.CASet {
		s, err := cabundle.NewCASet("Secret koordinator-system/webhook-certs (key ca.crt)", slices.Concat(pems...))
		require.NoError(t, err)
		return s
	}
	d := &policy.Decision{Mapping: "koordinator", Violations: []policy.Violation{{
		Rule: policy.RuleCAMismatch, Field: "webhooks[0].clientConfig.caBundle", Detail: "1 certificate(s) neither in the owner's CA set", Found: []string{f.Foreign.Short()},
	}}}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		confirmedAgainst, current cabundle.CASet
		exp                       bool
	}{
		"if the owner's CA set is the one the mismatch was confirmed against, it is recent": {
			confirmedAgainst: set(f.Owner.PEM), current: set(f.Owner.PEM), exp: true,
		},
		"if the owner's source rotated to the foreign CA, it is not": {
			confirmedAgainst: set(f.Owner.PEM), current: set(f.Foreign.PEM),
		},
		"if the owner's source rotated to another CA, it is not": {
			confirmedAgainst: set(f.Owner.PEM), current: set(f.OwnerNew.PEM),
		},
		"if the owner's source added a CA beside the old one, it is not": {
			confirmedAgainst: set(f.Owner.PEM), current: set(f.Owner.PEM, f.OwnerNew.PEM),
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			var c confirmedMismatches
			c.add(mismatchKey(d, test.confirmedAgainst), now)
			assert.Equal(t, test.exp, c.recent(mismatchKey(d, test.current), now.Add(time.Second)))
		})
	}
}

// A foreign CA confirmed moments ago is not denied from memory once the
// owner's source has rotated: the write waits for the source again and is
// allowed when the source now holds that CA.
func Test_Handler_Decide_confirmedMismatchForgottenOnRotation(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, guardConfigDoc(f))
	watched := func(pems ...[]byte) casource.Result {
		r := caResult(t, "Secret koordinator-system/webhook-certs (key ca.crt)", false, pems...)
		r.Watched = true
		return r
	}
	tests := map[string]struct {
		// after is what the resolver answers once the source rotated,
		// without waiting (the watches' store) and after waiting for it.
		afterWatched, afterLive casource.Result
		expOutcome              policy.Outcome
		expRereads              map[string]float64
	}{
		"if the watches already hold the rotation to the foreign CA, allow it": {
			afterWatched: watched(f.Foreign.PEM), afterLive: watched(f.Foreign.PEM),
			expOutcome: policy.OutcomeAllow,
			expRereads: map[string]float64{"confirmed": 1},
		},
		"if the owner's CA set changed since the confirmation, wait for the source again and allow the CA it now holds": {
			afterWatched: watched(f.OwnerNew.PEM), afterLive: watched(f.OwnerNew.PEM, f.Foreign.PEM),
			expOutcome: policy.OutcomeAllow,
			expRereads: map[string]float64{"confirmed": 1, "rotated": 1},
		},
		"if the owner's CA set is unchanged, deny from memory without waiting": {
			afterWatched: watched(f.Owner.PEM), afterLive: watched(f.Foreign.PEM),
			expOutcome: policy.OutcomeDeny,
			expRereads: map[string]float64{"confirmed": 1, "recent": 1},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			res := &fakeResolver{Cached: watched(f.Owner.PEM), Live: watched(f.Owner.PEM)}
			h := newHandler(t, HandlerOptions{Config: StaticConfig{Config: cfg}, CA: res, Metrics: m, Recorder: &fakeRecorder{}})
			write := func() policy.Decision {
				return h.Decide(t.Context(), &policy.Input{Operation: policy.OperationUpdate, Kind: policy.KindValidating, Name: "koord",
					User:       policy.User{Username: koordManager},
					OldEntries: []policy.Entry{{Name: "w", CABundle: f.Owner.PEM}},
					Entries:    []policy.Entry{{Name: "w", CABundle: f.Foreign.PEM}}})
			}
			require.Equal(t, policy.OutcomeDeny, write().Outcome, "the foreign CA is confirmed foreign first")

			res.mu.Lock()
			res.Cached, res.Live = test.afterWatched, test.afterLive
			res.mu.Unlock()
			d := write()

			assert.Equal(t, test.expOutcome, d.Outcome, "%s", d.Message())
			for outcome, v := range test.expRereads {
				assert.Equal(t, v, toFloat64(t, m.CALiveRereads.WithLabelValues(outcome)), "ca_live_rereads_total{outcome=%q}", outcome)
			}
		})
	}
}
