package records

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxNameLen is the longest object name kube-apiserver stores: a DNS
// subdomain (ClusterReports and Events both validate their names as one).
const maxNameLen = 253

// fitName is head+tail when that fits in a name; otherwise head cut short,
// a hash of hashed (so that two long names that share the cut part get two
// names), then tail. head and tail are each valid parts of a DNS subdomain
// (head a configuration or mapping name behind a fixed prefix, tail empty
// or "." and alphanumerics). The cut part is trimmed of trailing '.' and
// '-': a label must end in an alphanumeric, and the cut can fall right
// after a dot ("a.-0123…" is not a name); without the trim the record was
// refused as invalid at every flush.
func fitName(head, tail, hashed string) string {
	if len(head)+len(tail) <= maxNameLen {
		return head + tail
	}
	sum := sha256.Sum256([]byte(hashed))
	suffix := "-" + hex.EncodeToString(sum[:8])
	keep := maxNameLen - len(suffix) - len(tail)
	return strings.TrimRight(head[:keep], ".-") + suffix + tail
}
