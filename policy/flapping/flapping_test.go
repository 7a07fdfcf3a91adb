package flapping

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

func Test_FlapDetector(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	write := func(name, subject, bundle string, dryRun bool) *policy.Decision {
		return &policy.Decision{Kind: policy.KindValidating, Name: name, Subject: subject, DryRun: dryRun,
			Changes: []policy.BundleChange{{Webhook: "a", Hash: sha256.Sum256([]byte(bundle))}}}
	}
	type step struct {
		d      *policy.Decision
		at     time.Duration
		report *Report
	}
	tests := map[string]struct {
		steps []step
	}{
		"if a rotation writes old+new then new, do not report": {steps: []step{
			{d: write("koord", "sa", "old+new", false), at: 0},
			{d: write("koord", "sa", "new", false), at: time.Second},
			{d: write("koord", "sa", "new", false), at: 2 * time.Second},
		}},
		"if more than 3 distinct bundles are written within the window, report once with the writers": {steps: []step{
			{d: write("koord", "r1", "ca1", false), at: 0},
			{d: write("koord", "r2", "ca2", false), at: time.Second},
			{d: write("koord", "r3", "ca3", false), at: 2 * time.Second},
			{d: write("koord", "r4", "ca4", false), at: 3 * time.Second, report: &Report{Kind: policy.KindValidating, Name: "koord", DistinctBundles: 4, Window: time.Minute, Writers: []string{"r1", "r2", "r3", "r4"}}},
			{d: write("koord", "r5", "ca5", false), at: 4 * time.Second},
		}},
		"if the distinct bundles are spread wider than the window, do not report": {steps: []step{
			{d: write("koord", "r1", "ca1", false), at: 0},
			{d: write("koord", "r2", "ca2", false), at: 30 * time.Second},
			{d: write("koord", "r3", "ca3", false), at: 61 * time.Second},
			{d: write("koord", "r4", "ca4", false), at: 92 * time.Second},
		}},
		"if the writes are dry runs or change no caBundle, ignore them": {steps: []step{
			{d: write("koord", "r1", "ca1", true), at: 0},
			{d: write("koord", "r2", "ca2", true), at: 1},
			{d: write("koord", "r3", "ca3", true), at: 2},
			{d: write("koord", "r4", "ca4", true), at: 3},
			{d: &policy.Decision{Kind: policy.KindValidating, Name: "koord"}, at: 4},
		}},
		"if two configurations each see few bundles, track them apart": {steps: []step{
			{d: write("a", "r1", "ca1", false), at: 0},
			{d: write("b", "r2", "ca2", false), at: 1},
			{d: write("a", "r3", "ca3", false), at: 2},
			{d: write("b", "r4", "ca4", false), at: 3},
		}},
		"if flapping continues past the window, report it again": {steps: []step{
			{d: write("koord", "r1", "ca1", false), at: 0},
			{d: write("koord", "r1", "ca2", false), at: 1},
			{d: write("koord", "r1", "ca3", false), at: 2},
			{d: write("koord", "r1", "ca4", false), at: 3, report: &Report{Kind: policy.KindValidating, Name: "koord", DistinctBundles: 4, Window: time.Minute, Writers: []string{"r1"}}},
			{d: write("koord", "r1", "ca5", false), at: 70 * time.Second},
			{d: write("koord", "r1", "ca6", false), at: 71 * time.Second},
			{d: write("koord", "r1", "ca7", false), at: 72 * time.Second},
			{d: write("koord", "r1", "ca8", false), at: 73 * time.Second, report: &Report{Kind: policy.KindValidating, Name: "koord", DistinctBundles: 4, Window: time.Minute, Writers: []string{"r1"}}},
		}},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			f := NewDetector(3, time.Minute)
			for i, s := range test.steps {
				got, ok := f.Observe(s.d, t0.Add(s.at))
				if s.report == nil {
					assert.False(t, ok, "step %d reported %+v", i, got)
					continue
				}
				require.True(t, ok, "step %d did not report", i)
				assert.Equal(t, *s.report, got, "step %d", i)
			}
		})
	}
}

func Test_FlapDetector_boundsMemory(t *testing.T) {
	f := NewDetector(1000, time.Hour)
	t0 := time.Now()
	for i := range 10 * maxTrackedWrites {
		f.Observe(&policy.Decision{Kind: policy.KindMutating, Name: "storm", Subject: "s", Changes: []policy.BundleChange{{Hash: sha256.Sum256([]byte{byte(i), byte(i >> 8)})}}}, t0)
	}
	assert.Len(t, f.writes[flapKey{policy.KindMutating, "storm"}], maxTrackedWrites)
}

func Test_FlapDetector_prunesConfigurations(t *testing.T) {
	write := func(name string) *policy.Decision {
		return &policy.Decision{Kind: policy.KindValidating, Name: name, Subject: "s", Changes: []policy.BundleChange{{Hash: sha256.Sum256([]byte(name))}}}
	}
	tests := map[string]struct {
		writes     func(f *Detector, t0 time.Time)
		expTracked int
		expKept    []string
	}{
		"if configurations get no write within the window, drop them on a later write": {
			writes: func(f *Detector, t0 time.Time) {
				for i := range 100 {
					f.Observe(write(fmt.Sprint("fresh-", i)), t0)
				}
				f.Observe(write("later"), t0.Add(2*time.Minute))
			},
			expTracked: 1,
			expKept:    []string{"later"},
		},
		"if more configurations are written within the window than the cap, keep the cap, dropping the least recently written": {
			writes: func(f *Detector, t0 time.Time) {
				for i := range 3 * maxTrackedConfigs {
					f.Observe(write(fmt.Sprint("fresh-", i)), t0.Add(time.Duration(i)*time.Millisecond))
				}
			},
			expTracked: maxTrackedConfigs,
			expKept:    []string{fmt.Sprint("fresh-", 3*maxTrackedConfigs-1), fmt.Sprint("fresh-", 2*maxTrackedConfigs)},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			f := NewDetector(3, time.Minute)
			test.writes(f, time.Now())
			assert.Equal(t, test.expTracked, f.Tracked())
			for _, n := range test.expKept {
				assert.Contains(t, f.writes, flapKey{policy.KindValidating, n})
			}
		})
	}
}

// The owner re-writing its own bundle is the common case; tracking it must
// not allocate per write (the slice of tracked writes grows amortized).
func Test_FlapDetector_steadyWritesDoNotAllocate(t *testing.T) {
	f := NewDetector(guardapi.DefaultMaxDistinctBundles, time.Minute)
	d := &policy.Decision{Kind: policy.KindValidating, Name: "koord", Subject: "sa",
		Changes: []policy.BundleChange{{Webhook: "a", Hash: sha256.Sum256([]byte("ca"))}}}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for range maxTrackedWrites {
		f.Observe(d, now)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, flapping := f.Observe(d, now); flapping {
			t.Fatal("one bundle re-written is not flapping")
		}
	})
	assert.Less(t, allocs, 1.0)
}

// Re-writes of a (bundle, writer) already tracked keep one entry, at its
// latest time: eight replicas each re-writing their own CA are eight
// entries however many writes they make, and the window still counts from
// each pair's latest write.
func Test_FlapDetector_rewritesKeepOneEntryPerWriterAndBundle(t *testing.T) {
	f := NewDetector(guardapi.DefaultMaxDistinctBundles, time.Minute)
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	key := flapKey{policy.KindValidating, "koord"}
	reports := 0
	for i := range 800 {
		replica := fmt.Sprint("replica-", i%8)
		d := &policy.Decision{Kind: policy.KindValidating, Name: "koord", Subject: replica,
			Changes: []policy.BundleChange{{Webhook: "a", Hash: sha256.Sum256([]byte(replica))}}}
		if _, flapping := f.Observe(d, t0.Add(time.Duration(i)*time.Millisecond)); flapping {
			reports++
		}
	}
	assert.Len(t, f.writes[key], 8)
	assert.Equal(t, 1, reports, "reported once per window")
	// A window after replica-7's last write (the others wrote 1-7 ms
	// before it), only its entry is left when replica-0 writes again: two
	// distinct bundles.
	last := f.writes[key][len(f.writes[key])-1]
	assert.Equal(t, "replica-7", last.writer)
	d := &policy.Decision{Kind: policy.KindValidating, Name: "koord", Subject: "replica-0",
		Changes: []policy.BundleChange{{Webhook: "a", Hash: sha256.Sum256([]byte("replica-0"))}}}
	f.Observe(d, last.at.Add(time.Minute))
	assert.Equal(t, 2, distinctHashes(f.writes[key], 10))
}

// A report counts every distinct bundle in the window, not just enough to
// cross the threshold.
func Test_FlapDetector_reportCountsAllDistinctBundles(t *testing.T) {
	f := NewDetector(1, time.Minute)
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	d := &policy.Decision{Kind: policy.KindValidating, Name: "koord", Subject: "sa"}
	for _, ca := range []string{"ca1", "ca2", "ca3"} {
		d.Changes = append(d.Changes, policy.BundleChange{Webhook: ca, Hash: sha256.Sum256([]byte(ca))})
	}
	report, flapping := f.Observe(d, now)
	require.True(t, flapping)
	assert.Equal(t, 3, report.DistinctBundles)
	assert.Equal(t, []string{"sa"}, report.Writers)
}

func Test_Detector_Forget(t *testing.T) {
	fd := NewDetector(1, time.Minute)
	now := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	write := func(hash byte) *policy.Decision {
		return &policy.Decision{Kind: policy.KindValidating, Name: "koord", Subject: "w", Changes: []policy.BundleChange{{Hash: [32]byte{hash}}}}
	}
	_, flaps := fd.Observe(write(1), now)
	require.False(t, flaps)
	fd.Forget(policy.KindValidating, "koord")
	// Forgotten: a second distinct bundle is the first one tracked again.
	_, flaps = fd.Observe(write(2), now)
	require.False(t, flaps, "a deleted configuration's writes must not count towards flapping of its successor")
	_, flaps = fd.Observe(write(3), now)
	require.True(t, flaps)
}
