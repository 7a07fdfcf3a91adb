package cost

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// ObjectResult is what one of the owner's worst writes costs on one guarded
// object.
type ObjectResult struct {
	// Mapping is the mapping that owns Object.
	Mapping string
	Object  *unstructured.Unstructured
	Result  Result
}

// WorstWrites runs the owner's worst writes (Check) on every one of
// configurations (webhook configurations as stored) that a mapping of cfg
// owns, in the policies generated for that mapping with its CA of cas; a
// configuration no mapping owns is not checked. The results are in the
// order of configurations, each one's in the order of Writes.
//
// It checks every configuration afresh, one Checker per mapping: for a
// caller that runs once over a set of objects (render policy over
// --objects). The policy syncer runs the check at every pass, so it keeps
// results by resourceVersion and bounds the checks of one pass instead.
func WorstWrites(ctx context.Context, cfg *policy.Mappings, cas map[string]vap.CA, configurations []*unstructured.Unstructured) ([]ObjectResult, error) {
	checkers := map[string]*Checker{}
	var out []ObjectResult
	for _, obj := range configurations {
		m := cfg.Match(policy.GuardedKind(obj.GetKind()), obj.GetName(), obj.GetLabels())
		if m.Owner == nil {
			continue
		}
		c, ok := checkers[m.Owner.Name]
		if !ok {
			var err error
			if c, err = New(cfg, m.Owner.Name, cas[m.Owner.Name]); err != nil {
				return nil, err
			}
			checkers[m.Owner.Name] = c
		}
		rs, err := c.Check(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("owners[%s]: %s %s: %w", m.Owner.Name, obj.GetKind(), obj.GetName(), err)
		}
		for _, r := range rs {
			out = append(out, ObjectResult{Mapping: m.Owner.Name, Object: obj, Result: r})
		}
	}
	return out, nil
}
