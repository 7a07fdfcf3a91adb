package records

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/policy"
)

// decided is an audited write as admission decides it (subject: the user).
func decided(write string) *policy.Decision {
	d := auditDecision("system:serviceaccount:app:replica-0", "1111111111111111")
	d.Write = write
	return d
}

// observed is the same write as the observer sees it (subject: the field
// manager; origin observed).
func observed(write string) *policy.Decision {
	d := auditDecision(policy.ObservedSubjectPrefix+"replica-0", "1111111111111111")
	d.Observed, d.Write = true, write
	return d
}

// total is the sum of the counts of every result of the report.
func total(t *testing.T, r *Recorder) int {
	t.Helper()
	rep := getReport(t, r.opts.Client)
	n := 0
	for _, res := range rep.Results {
		c, err := strconv.Atoi(res.Properties[PropCount])
		require.NoError(t, err)
		n += c
	}
	return n
}

func Test_Recorder_oneWriteOneRecord(t *testing.T) {
	now := func() time.Time { return t0 }
	t.Run("if admission and the observer record the same N writes, the report counts N", func(t *testing.T) {
		r := newRecorder(newFakeClient(t), now, nil)
		const n = 7
		for i := range n {
			write := policy.WriteID(cfgUID, fmt.Sprint(100+i))
			r.RecordDecision(t.Context(), decided(write))
			r.RecordDecision(t.Context(), observed(write))
		}
		r.Flush(t.Context())
		assert.Equal(t, n, total(t, r))
		assert.Equal(t, map[string]string{"ca-mismatch/system:serviceaccount:app:replica-0/1111111111111111": fmt.Sprint(n)}, counts(getReport(t, r.opts.Client)),
			"in one flush the write counts where admission put it, with the user")
	})
	t.Run("if the observer's record of a write is flushed after admission's, in another flush, it counts once", func(t *testing.T) {
		r := newRecorder(newFakeClient(t), now, nil)
		r.RecordDecision(t.Context(), decided("w/1"))
		r.Flush(t.Context())
		r.RecordDecision(t.Context(), observed("w/1"))
		r.RecordDecision(t.Context(), observed("w/2"))
		r.Flush(t.Context())
		assert.Equal(t, 2, total(t, r))
	})
	t.Run("if the leader's observer flushes a write before the replica whose admission decided it, admission's record takes the count back", func(t *testing.T) {
		c := newFakeClient(t)
		admission, leader := newRecorder(c, now, nil), newRecorder(c, now, nil)
		leader.RecordDecision(t.Context(), observed("w/1"))
		leader.RecordDecision(t.Context(), observed("w/3"))
		leader.Flush(t.Context())
		admission.RecordDecision(t.Context(), decided("w/1"))
		admission.RecordDecision(t.Context(), decided("w/2"))
		admission.Flush(t.Context())
		assert.Equal(t, 3, total(t, admission))
		assert.Equal(t, map[string]string{
			"ca-mismatch/" + policy.ObservedSubjectPrefix + "replica-0/1111111111111111": "1",
			"ca-mismatch/system:serviceaccount:app:replica-0/1111111111111111":           "2",
		}, counts(getReport(t, c)))
	})
	t.Run("if the observer's only write is taken back, its result goes", func(t *testing.T) {
		c := newFakeClient(t)
		admission, leader := newRecorder(c, now, nil), newRecorder(c, now, nil)
		leader.RecordDecision(t.Context(), observed("w/1"))
		leader.Flush(t.Context())
		admission.RecordDecision(t.Context(), decided("w/1"))
		admission.Flush(t.Context())
		assert.Equal(t, map[string]string{"ca-mismatch/system:serviceaccount:app:replica-0/1111111111111111": "1"}, counts(getReport(t, c)))
	})
	t.Run("if admission decides two requests against the same stored object (concurrent writers, a retried write), each counts", func(t *testing.T) {
		r := newRecorder(newFakeClient(t), now, nil)
		r.RecordDecision(t.Context(), decided("w/1"))
		r.RecordDecision(t.Context(), decided("w/1"))
		r.RecordDecision(t.Context(), observed("w/1"))
		r.Flush(t.Context())
		assert.Equal(t, 2, total(t, r))
	})
	t.Run("if decisions carry no write identity, each counts", func(t *testing.T) {
		r := newRecorder(newFakeClient(t), now, nil)
		r.RecordDecision(t.Context(), decided(""))
		r.RecordDecision(t.Context(), decided(""))
		r.RecordDecision(t.Context(), observed(""))
		r.Flush(t.Context())
		assert.Equal(t, 3, total(t, r))
	})
	t.Run("if more writes are recorded than a report remembers, the oldest are forgotten and the annotation stays bounded", func(t *testing.T) {
		r := newRecorder(newFakeClient(t), now, nil)
		const flushes, perFlush = 3, 1000
		for f := range flushes {
			for i := range perFlush {
				r.RecordDecision(t.Context(), decided(fmt.Sprint("w/", f, "/", i)))
			}
			r.Flush(t.Context())
		}
		rep := getReport(t, r.opts.Client)
		assert.Equal(t, maxRecordedWrites, len(parseRecordedWrites(rep.Annotations[AnnotationRecordedWrites]).order))
		assert.Equal(t, flushes*perFlush, total(t, r))
	})
}
