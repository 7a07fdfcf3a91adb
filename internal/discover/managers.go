package discover

import (
	"encoding/json"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CABundleManagers are the field managers that own a caBundle field of any
// webhooks[] entry, sorted.
func CABundleManagers(mfs []metav1.ManagedFieldsEntry) []string {
	set := map[string]struct{}{}
	for _, mf := range mfs {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		whs, _ := fields["f:webhooks"].(map[string]any)
		for _, entry := range whs {
			e, _ := entry.(map[string]any)
			cc, _ := e["f:clientConfig"].(map[string]any)
			if _, ok := cc["f:caBundle"]; ok {
				set[mf.Manager] = struct{}{}
			}
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
