package vap

import (
	"fmt"
	"maps"
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

// sameClientConfigs is CEL that is true for an UPDATE (both objects
// present: its caller says so) that keeps every entry's name, position
// and clientConfig (caBundle, url, service). It
// walks the entries once, each beside the stored entry at its index, and
// compares four fields of each: the name, the caBundle, the URL and the
// service (a small struct, compared as a whole). Each field read is a
// reflective lookup inside kube-apiserver, so the fewer the cheaper: a
// name and endpoint built as one string per entry cost 3.7 times the
// least caBundle policy for a timeout change at 50 entries, and comparing
// whole clientConfigs walks every caBundle byte by reflection. An absent
// field compares equal only to an absent one (optional values).
var sameClientConfigs = `has(object.webhooks) && has(oldObject.webhooks) && ` +
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
// annotation may change. It reads both objects without asking whether
// the request is an UPDATE: the caller's condition has, and kube-apiserver
// evaluates this for every write it decides alone, where each test costs.
func WebhooksKeepTrust() string {
	return `(` + sameGeneration + ` || ` + sameClientConfigs + `) && ` + samePointerAlways
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
// object matches nothing. Each requirement reads its one label as an
// optional value (absent when the object has no such label or no labels),
// so that kube-apiserver builds no list or map to evaluate it.
func LabelSelectorExpression(sel *metav1.LabelSelector, obj string) (string, error) {
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return "", err
	}
	label := func(key string) string { return obj + `.metadata.?labels[?` + CELString(key) + `]` }
	reqs := []string{obj + ` != null`}
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		reqs = append(reqs, label(k)+` == optional.of(`+CELString(sel.MatchLabels[k])+`)`)
	}
	for _, r := range sel.MatchExpressions {
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			reqs = append(reqs, label(r.Key)+` in `+optionalList(r.Values))
		case metav1.LabelSelectorOpNotIn:
			reqs = append(reqs, `!(`+label(r.Key)+` in `+optionalList(r.Values)+`)`)
		case metav1.LabelSelectorOpExists:
			reqs = append(reqs, label(r.Key)+`.hasValue()`)
		case metav1.LabelSelectorOpDoesNotExist:
			reqs = append(reqs, `!`+label(r.Key)+`.hasValue()`)
		default:
			return "", fmt.Errorf("label selector operator %q is not supported", r.Operator)
		}
	}
	return `(` + strings.Join(reqs, " && ") + `)`, nil
}

// optionalList is CEL for the list of values, each as a present optional
// value: an absent label is in no such list.
func optionalList(values []string) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = `optional.of(` + CELString(v) + `)`
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
