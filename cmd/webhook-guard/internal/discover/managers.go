package discover

import (
	"encoding/json"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CABundleManagers are the field managers that own a caBundle field of any
// webhooks[] entry, sorted.
func CABundleManagers(mfs []metav1.ManagedFieldsEntry) []string {
	return managersOf(mfs, func(fields map[string]any) bool {
		whs, _ := fields["f:webhooks"].(map[string]any)
		for _, entry := range whs {
			e, _ := entry.(map[string]any)
			cc, _ := e["f:clientConfig"].(map[string]any)
			if _, ok := cc["f:caBundle"]; ok {
				return true
			}
		}
		return false
	})
}

// caBundleManagersAt are the field managers that own the field at path
// (managedFields keys, such as f:spec, f:caBundle), sorted.
func caBundleManagersAt(mfs []metav1.ManagedFieldsEntry, path ...string) []string {
	return managersOf(mfs, func(fields map[string]any) bool {
		node := fields
		for _, k := range path[:len(path)-1] {
			node, _ = node[k].(map[string]any)
		}
		_, ok := node[path[len(path)-1]]
		return ok
	})
}

// managersOf are the field managers whose fields owns says yes to, sorted.
func managersOf(mfs []metav1.ManagedFieldsEntry, owns func(fields map[string]any) bool) []string {
	set := map[string]struct{}{}
	for _, mf := range mfs {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if owns(fields) {
			set[mf.Manager] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
