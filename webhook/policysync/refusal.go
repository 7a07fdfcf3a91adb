package policysync

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapname"
)

// refusal is a refused write of one of a mapping's objects.
type refusal struct {
	object string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refusedObject names the object of a refusal ("" for another error).
func refusedObject(err error) string {
	if r, ok := errors.AsType[*refusal](err); ok {
		return r.object
	}
	return ""
}

// refused reports whether err is kube-apiserver refusing a write for what
// the object is (invalid, too large, forbidden): writing the same object
// again will not succeed. Anything else
// (timeouts, an unreachable or overloaded API server, a resourceVersion
// conflict) is retried as it is at the next pass.
func refused(err error) bool {
	if _, ok := errors.AsType[net.Error](err); ok {
		return false
	}
	if apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		return false
	}
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err),
		apierrors.IsRequestEntityTooLargeError(err), apierrors.IsAlreadyExists(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err):
		return true
	}
	return isStorageTooLarge(err)
}

// refusalCA is the CA a mapping is generated with once kube-apiserver refused
// one of its objects: none, so its caBundle changes fail closed as
// ca-unavailable, as they do when the CA source cannot be read. The reason
// names the refusal, so the denial tells the writer why.
func refusalCA(err error) vap.CA {
	return vap.CAFromError(fmt.Errorf("kube-apiserver refused the mapping's generated policy (%s)", trimReason(refusalReason(err))))
}

// refusalReason is kube-apiserver's answer itself, without the verb the
// guard tried: a refused create and, at the next pass, a refused update of
// the same object give the same reason, so the fail-closed policy holding
// it is not rewritten.
func refusalReason(err error) string {
	if status, ok := errors.AsType[*apierrors.StatusError](err); ok {
		return status.Error()
	}
	return err.Error()
}

// maxReasonLen bounds the refusal quoted in the fail-closed policy's
// message, the Event and the log: kube-apiserver's answer may quote the
// refused field whole (an expression holding a 100 KB CA), so what is left
// once the quoted values are cut is kept by its start and its end.
const (
	maxReasonLen  = 640
	reasonHead    = 240
	maxReasonTail = 160
)

func trimReason(s string) string {
	if len(s) <= maxReasonLen {
		return oneLine(s)
	}
	// The refused values and the source lines CEL quotes under its errors
	// (a matchCondition's, and their caret lines) are cut first: the
	// reasons stand between them, where head and tail alone would drop
	// them.
	s = quotedValue.ReplaceAllStringFunc(s, func(q string) string {
		if len(q) <= maxQuoted {
			return q
		}
		return q[:maxQuoted] + ` …"`
	})
	var kept []string
	for l := range strings.SplitSeq(s, "\n") {
		if !strings.HasPrefix(l, " | ") {
			kept = append(kept, l)
		}
	}
	s = strings.Join(kept, " ")
	if len(s) <= maxReasonLen {
		return strings.ToValidUTF8(s, "")
	}
	// The first field error is kept whole where it fits: the others are
	// often what it causes (a variable too long to compile leaves those
	// that read it untyped).
	head := reasonHead
	if i := strings.Index(s, ", spec."); i > head && i <= maxReasonLen-maxReasonTail {
		head = i
	}
	return strings.ToValidUTF8(s[:head]+" … "+s[len(s)-(maxReasonLen-head):], "")
}

// oneLine joins the lines of s: kube-apiserver drops a message expression
// whose result holds a line break (and denies with the static message),
// and CEL's errors quote the refused source on lines of their own.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// quotedValue is a field error's refused value, as kube-apiserver quotes
// it; maxQuoted is what is kept of it.
var quotedValue = regexp.MustCompile(`Invalid value: "(?:[^"\\]|\\.)*"`)

const maxQuoted = 80

// mappingOf names the mapping that generates each object name: the names
// its match generates, not every name it might (mapping "app" might
// generate webhook-guard-app-crds, which mapping "app-crds" does).
func mappingOf(cfg *policy.Mappings) map[string]string {
	out := map[string]string{}
	for i := range cfg.Spec.Owners {
		for _, n := range vapname.Generated(&cfg.Spec.Owners[i]) {
			out[n] = cfg.Spec.Owners[i].Name
		}
	}
	return out
}

// isStorageTooLarge reports etcd refusing an object past its request size
// limit (--max-request-bytes, 1.5 MiB by default), which kube-apiserver
// returns as a 500 quoting etcd's message.
func isStorageTooLarge(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "request is too large")
}
