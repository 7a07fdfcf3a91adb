package policy

import (
	"fmt"
	"slices"
	"testing"

	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// BenchmarkDecide measures the common hot path: the owner's controller
// rotating the caBundle of every entry to its new CA, with the CA resolved.
// Every entry's bundle is parsed and checked against the CA set.
func BenchmarkDecide(b *testing.B) {
	f := testFixtures(b)
	c := mustLoad(b, decideDoc(f))
	ca := CAResult{Set: cabundle.NewCASetFromFingerprints("secret koordinator-system/webhook-certs", f.Owner.FP, f.OwnerNew.FP), Resolved: true}

	for _, n := range []int{5, 50} {
		b.Run(fmt.Sprintf("webhooks=%d", n), func(b *testing.B) {
			in := Input{
				Operation: OperationUpdate,
				Kind:      KindValidating,
				Name:      "koord",
				User:      User{Username: sa("koordinator-system", "koord-manager"), Groups: []string{"system:serviceaccounts", "system:authenticated"}},
				CA:        ca,
			}
			for i := range n {
				name := fmt.Sprintf("webhook-%d.koord.io", i)
				in.OldEntries = append(in.OldEntries, Entry{Name: name, CABundle: f.Owner.PEM})
				in.Entries = append(in.Entries, Entry{Name: name, CABundle: f.OwnerNew.PEM})
			}
			if d := c.Decide(&in); d.Outcome != OutcomeAllow || len(d.Changes) != n {
				b.Fatalf("got outcome %q with %d changes, want allow with %d", d.Outcome, len(d.Changes), n)
			}
			b.SetBytes(int64(n * len(f.OwnerNew.PEM)))
			b.ReportAllocs()
			for b.Loop() {
				c.Decide(&in)
			}
		})
	}
}

// BenchmarkParseBundle parses one ~1 KB CA and a rotation bundle of two.
func BenchmarkParseBundle(b *testing.B) {
	f := testFixtures(b)
	for name, data := range map[string][]byte{
		"certs=1": f.Owner.PEM,
		"certs=2": slices.Concat(f.Owner.PEM, f.OwnerNew.PEM),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cabundle.Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
