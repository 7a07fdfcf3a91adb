package vap

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/policy"
)

// What "leaves the trust alone" means, in CEL, for both shapes.
//
// A write leaves the trust of a guarded object alone when it changes none
// of what decides whom kube-apiserver trusts for it: a caBundle, an
// endpoint (a URL or a service), insecureSkipTLSVerify, the CA pointer
// (cainjector's annotations), or the entries themselves (added, removed or
// renamed). The policy shape's changes-trust matchCondition skips a
// writer's such write (writerKeepsTrust, which also lets the CA itself
// through, as the policy holds it); the static webhook's matchCondition
// skips it as well (package static), so that kube-apiserver decides it
// in-process and never calls the guard, whose answer to it is always
// "allowed". Both are built from the pieces below.

// keepsEntries is CEL that is true for an UPDATE whose webhooks are the
// stored ones (sameWebhooks, read from the generation), or keep every
// entry's name and position and satisfy entriesOK, CEL over the entries
// of both objects.
func keepsEntries(entriesOK string) string {
	return `(` + sameWebhooks + ` || ` + sameEntryNames + ` && (` + entriesOK + `))`
}

// sameClientConfigs is CEL that is true for an UPDATE that keeps every
// entry's name, position and clientConfig (caBundle, url, service). It
// walks the entries once, each beside the stored entry at its index, and
// compares four fields of each: the name, the caBundle, the URL and the
// service (a small struct, compared as a whole). Each field read is a
// reflective lookup inside kube-apiserver, so the fewer the cheaper: a
// name and endpoint built as one string per entry cost 3.7 times the
// least caBundle policy for a timeout change at 50 entries, and comparing
// whole clientConfigs walks every caBundle byte by reflection. An absent
// field compares equal only to an absent one (optional values).
var sameClientConfigs = `request.operation == "UPDATE" && object != null && oldObject != null && has(object.webhooks) && has(oldObject.webhooks) && ` +
	`size(object.webhooks) == size(oldObject.webhooks) && object.webhooks.all(i, e, ` +
	`e.name == oldObject.webhooks[i].name && ` +
	`e.clientConfig.?caBundle == oldObject.webhooks[i].clientConfig.?caBundle && ` +
	`e.clientConfig.?url == oldObject.webhooks[i].clientConfig.?url && ` +
	`e.clientConfig.?service == oldObject.webhooks[i].clientConfig.?service)`

// samePointerAlways requires the CA pointer unchanged: each of cainjector's
// annotations the same in both objects, or absent from both (an optional
// value per key, so no list is built per evaluation; an annotation set to
// "" differs from an absent one, which only sends more to the guard).
// Both objects are non-null wherever it is used.
var samePointerAlways = func() string {
	var same []string
	for _, k := range policy.PointerAnnotations {
		same = append(same, `object.metadata.?annotations[?`+CELString(k)+`] == oldObject.metadata.?annotations[?`+CELString(k)+`]`)
	}
	return `(` + strings.Join(same, ` && `) + `)`
}()

// WebhooksKeepTrust is CEL that is true for an UPDATE of a webhook
// configuration that leaves its trust alone: every entry keeps its name,
// its position and its clientConfig (caBundle and endpoint), and the CA
// pointer stays. A timeout, a rule, a failurePolicy, a label or an
// annotation may change.
func WebhooksKeepTrust() string {
	return `(` + sameWebhooks + ` || ` + sameClientConfigs + `) && ` + samePointerAlways
}

// TrustObjectKeepsTrust is CEL that is true for an UPDATE of an object of
// kind (a CRD or an APIService) that leaves its trust alone: the same
// caBundle, insecureSkipTLSVerify, entry (conversion webhook, service),
// endpoint and CA pointer. No rule of either shape decides such a write,
// whoever makes it (policy.GuardedKind.OwnsTrustOnly). False for a kind
// whose whole object a mapping owns.
func TrustObjectKeepsTrust(kind string) (string, bool) {
	i := slices.IndexFunc(trustKinds, func(k trustKind) bool { return string(k.kind) == kind })
	if i < 0 {
		return "", false
	}
	k := trustKinds[i]
	return `request.operation == "UPDATE" && object != null && oldObject != null && ` +
		k.bundle("object", k.entry("object")) + ` == ` + k.bundle("oldObject", k.entry("oldObject")) + ` && ` +
		k.insecure("object") + ` == ` + k.insecure("oldObject") + ` && ` +
		k.entry("object") + ` == ` + k.entry("oldObject") + ` && ` +
		`(!` + k.entry("object") + ` || ` + k.sameEndpoint("object", "oldObject") + `) && ` +
		samePointerAlways, true
}

// LabelSelectorExpression is CEL that is true when the labels of the
// object obj (an expression, such as "object") match sel, as
// labels.Selector matches them: every matchLabels pair, and every
// matchExpressions requirement (In, NotIn, Exists, DoesNotExist). A null
// object matches nothing.
func LabelSelectorExpression(sel *metav1.LabelSelector, obj string) (string, error) {
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return "", err
	}
	var reqs []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range sel.MatchLabels {
			if !yield(k) {
				return
			}
		}
	}) {
		reqs = append(reqs, fmt.Sprintf(`(%[1]s in l && l[%[1]s] == %[2]s)`, CELString(k), CELString(sel.MatchLabels[k])))
	}
	for _, r := range sel.MatchExpressions {
		key := CELString(r.Key)
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			reqs = append(reqs, fmt.Sprintf(`(%[1]s in l && l[%[1]s] in %[2]s)`, key, celList(r.Values)))
		case metav1.LabelSelectorOpNotIn:
			reqs = append(reqs, fmt.Sprintf(`(!(%[1]s in l) || !(l[%[1]s] in %[2]s))`, key, celList(r.Values)))
		case metav1.LabelSelectorOpExists:
			reqs = append(reqs, fmt.Sprintf(`(%s in l)`, key))
		case metav1.LabelSelectorOpDoesNotExist:
			reqs = append(reqs, fmt.Sprintf(`!(%s in l)`, key))
		default:
			return "", fmt.Errorf("label selector operator %q is not supported", r.Operator)
		}
	}
	match := "true"
	if len(reqs) > 0 {
		match = strings.Join(reqs, " && ")
	}
	return fmt.Sprintf(`(%[1]s != null && [has(%[1]s.metadata.labels) ? %[1]s.metadata.labels : {}].all(l, %[2]s))`, obj, match), nil
}
