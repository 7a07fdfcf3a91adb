package policy

import (
	"testing"
)

// The fuzz targets run their committed seed corpora (testdata/fuzz/<target>)
// in every `go test`; `make fuzz` explores beyond them for FUZZTIME each.

// FuzzLoad: any bytes as a GuardConfig file. Load never panics; a config it
// accepts matches and decides without panicking, and decides a write by an
// unknown subject the same way twice (the decision is pure).
func FuzzLoad(f *testing.F) {
	f.Add([]byte("apiVersion: webhook-guard.io/v1alpha1\nkind: GuardConfig\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Load(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Load returned a config with an error: %v", err)
			}
			return
		}
		for _, kind := range []GuardedKind{KindValidating, KindMutating} {
			for _, o := range cfg.Spec.Owners {
				names := o.Match.Validating
				if kind == KindMutating {
					names = o.Match.Mutating
				}
				for _, n := range names {
					if m := cfg.Match(kind, n, nil); m.Owner == nil || m.Owner.Name != o.Name {
						t.Fatalf("%s %q is listed by owners[%s] but matches %+v", kind, n, o.Name, m.Owner)
					}
					in := &Input{Operation: OperationUpdate, Kind: kind, Name: n, User: User{Username: "fuzz:nobody"},
						Entries: []Entry{{Name: "a.b.c"}}, OldEntries: []Entry{{Name: "a.b.c"}}}
					d1, d2 := cfg.Decide(in), cfg.Decide(in)
					if d1.Allowed() != d2.Allowed() || d1.Rule != d2.Rule {
						t.Fatalf("two decisions of one input differ: %v/%s vs %v/%s", d1.Allowed(), d1.Rule, d2.Allowed(), d2.Rule)
					}
				}
			}
		}
	})
}
