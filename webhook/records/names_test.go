package records

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/webhook-guard/webhook-guard/policy"
)

// edgeNames are valid configuration names (DNS subdomains) at the edges of
// the record names derived from them: the longest, dots and dashes where
// a report or Event name is cut, and the lengths around the cut.
func edgeNames(t *testing.T) map[string]string {
	t.Helper()
	names := map[string]string{
		"short":                                "a",
		"253 chars":                            strings.Repeat("a", 253),
		"253 chars of single-character labels": strings.TrimSuffix(strings.Repeat("a.", 127), "."),
		"253 chars of dash runs":               "a" + strings.Repeat("-", 251) + "a",
	}
	// Every length from 200 to 253, with a dot or a dash at every position
	// near the cut of a report (236 of prefix+name kept) or an Event (236 of
	// the name kept before "-hash.<16 hex>").
	for n := 200; n <= 253; n++ {
		names["length "+strconv.Itoa(n)] = strings.Repeat("b", n)
		for cut := n - 40; cut < n-1; cut++ {
			if cut < 1 {
				continue
			}
			for _, sep := range []string{".", "-"} {
				name := strings.Repeat("c", cut) + sep + strings.Repeat("d", n-cut-1)
				names["length "+strconv.Itoa(n)+" "+sep+" at "+strconv.Itoa(cut)] = name
			}
		}
	}
	for k, name := range names {
		require.Empty(t, apivalidation.NameIsDNSSubdomain(name, false), "test name %q is not a valid configuration name", k)
	}
	return names
}

func Test_recordNames_valid_for_every_valid_configuration_name(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for k, name := range edgeNames(t) {
		for _, kind := range []policy.GuardedKind{policy.KindValidating, policy.KindMutating, policy.KindAdmissionPolicy, policy.KindAdmissionPolicyBinding} {
			report := ReportName(kind, name)
			assert.Empty(t, apivalidation.NameIsDNSSubdomain(report, false), "%s: ClusterReport name %q of %s", k, report, kind)
		}
		absent := AbsentReportName(name)
		assert.Empty(t, apivalidation.NameIsDNSSubdomain(absent, false), "%s: absent report name %q", k, absent)
		event := EventName(name, at)
		assert.Empty(t, apivalidation.NameIsDNSSubdomain(event, false), "%s: Event name %q", k, event)
	}
}

func Test_recordNames_distinct_and_stable(t *testing.T) {
	long := strings.Repeat("a", 240)
	t.Run("if two long names share the cut part, their report names differ", func(t *testing.T) {
		assert.NotEqual(t, ReportName(policy.KindValidating, long+"x"), ReportName(policy.KindValidating, long+"y"))
	})
	t.Run("if a name fits, the report name is the readable one", func(t *testing.T) {
		assert.Equal(t, "webhook-guard.vwc.a.b", ReportName(policy.KindValidating, "a.b"))
		assert.Equal(t, "cfg.18bd1d4e35a30000", EventName("cfg", time.Unix(0, 0x18bd1d4e35a30000)))
	})
	t.Run("if a long name has no separator at the cut, the name is the one earlier releases gave (stored reports keep their names)", func(t *testing.T) {
		got := ReportName(policy.KindValidating, strings.Repeat("a", 253))
		assert.Len(t, got, 253)
		assert.Equal(t, "webhook-guard.vwc."+strings.Repeat("a", 236-18)+"-", got[:237])
	})
}

func Test_Flush_gives_up_on_a_report_it_cannot_write(t *testing.T) {
	refuse := func(err error) client.WithWatch {
		return interceptor.NewClient(newFakeClient(t), interceptor.Funcs{
			Update: func(_ context.Context, _ client.WithWatch, _ client.Object, _ ...client.UpdateOption) error {
				return err
			},
			Create: func(_ context.Context, _ client.WithWatch, _ client.Object, _ ...client.CreateOption) error {
				return err
			},
		})
	}
	t.Run("if the API server refuses the report as invalid, drop its records at once and count them", func(t *testing.T) {
		invalid := apierrors.NewInvalid(schema.GroupKind{Group: "openreports.io", Kind: "ClusterReport"}, "x", field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "x", "bad")})
		r := newRecorder(refuse(invalid), func() time.Time { return t0 }, nil)
		r.RecordDecision(t.Context(), auditDecision("u", "1111111111111111"))
		r.Flush(t.Context())
		assert.Empty(t, r.pending)
		assert.Equal(t, 1.0, testutil.ToFloat64(r.opts.Metrics.AbandonedResults.WithLabelValues("invalid")))
	})
	t.Run("if every write fails, retry a bounded number of flushes, then drop and count", func(t *testing.T) {
		r := newRecorder(refuse(apierrors.NewServiceUnavailable("down")), func() time.Time { return t0 }, nil)
		r.RecordDecision(t.Context(), auditDecision("u", "1111111111111111"))
		flushes := 0
		for len(r.pending) > 0 && flushes < 100 {
			r.Flush(t.Context())
			flushes++
		}
		assert.Equal(t, maxWriteAttempts, flushes)
		assert.Equal(t, 1.0, testutil.ToFloat64(r.opts.Metrics.AbandonedResults.WithLabelValues("attempts")))
	})
}
