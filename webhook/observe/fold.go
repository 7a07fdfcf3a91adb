package observe

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"slices"
	"strconv"

	"github.com/webhook-guard/webhook-guard/policy"
)

// Past maxPending writes of one configuration a new write must be folded
// into the pending ones. Folding two adjacent writes into one (the state
// between them is skipped, the net change judged) is harmless when the
// skipped state is one the observer would judge nothing about: the same
// caBundles (and labels and CA pointer, which choose the mapping and its
// CA) as the state before it or after it. A foreign CA written and
// reverted at once is a state unlike both its neighbours: folding it away
// would erase the write the observer exists to record. So fold picks, from
// the newest back, a skipped state equal in trust to a neighbour; failing
// that, a state equal in trust to another pending one (its finding is still
// recorded there); only when every pending state is distinct, 1,024
// different caBundle states queued while the worker is stuck, is one lost,
// and counted as such.

// trustKey is what the observer judges of a state: its entries' names,
// caBundles, endpoints and insecureSkipTLSVerify, its labels and its CA
// pointer, as one digest; the zero key for a deleted state.
type trustKey [sha256.Size]byte

// trustKeyOf is the trustKey of cur (nil: deleted).
func trustKeyOf(cur *object) trustKey {
	if cur == nil {
		return trustKey{}
	}
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(cur.kind))
	field([]byte(cur.meta.UID))
	for _, w := range cur.webhooks {
		e := w.Endpoint
		field([]byte(w.Name))
		field(w.CABundle)
		field([]byte{boolByte(w.InsecureSkipTLSVerify)})
		for _, s := range []string{e.URL, e.Namespace, e.Name, e.Path} {
			field([]byte(s))
		}
		// The port as decimal text: any int32 is one unambiguous field.
		field(strconv.AppendInt(nil, int64(e.Port), 10))
	}
	field([]byte{0xff}) // the end of the entries
	for _, k := range slices.Sorted(maps.Keys(cur.meta.Labels)) {
		field([]byte(k))
		field([]byte(cur.meta.Labels[k]))
	}
	p := policy.PointerOf(cur.meta.Annotations)
	for _, s := range []string{p.CAFrom, p.CAFromSecret, p.APIServerCA} {
		field([]byte(s))
	}
	var out trustKey
	h.Sum(out[:0])
	return out
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// sameTrust reports whether two pending writes leave the configuration in
// states the observer judges alike; never for a deleted state.
func sameTrust(a, b *write) bool {
	return a.cur != nil && b.cur != nil && a.key == b.key
}

// fold makes room for x in p (full), merging two adjacent writes into one;
// lost reports that the state it skipped was unlike every other pending
// one. p[0] is never changed: the worker may be deciding it.
func fold(p []write, x write) (out []write, lost bool) {
	n := len(p)
	at := func(i int) *write {
		if i == n {
			return &x
		}
		return &p[i]
	}
	// merge skips the state of write i: writes i and i+1 become one, from
	// the state before i to the state after i+1.
	merge := func(i int, keepAt bool) []write {
		next := *at(i + 1)
		m := write{cur: next.cur, old: p[i].old, key: next.key, at: next.at}
		if keepAt {
			m.at = p[i].at // the change judged is write i's
		}
		p[i] = m
		if i+1 == n {
			return p
		}
		return append(slices.Delete(p, i+1, i+2), x)
	}
	for i := n - 1; i >= 1; i-- {
		switch {
		case sameTrust(&p[i-1], &p[i]):
			return merge(i, false), false // write i changed nothing judged
		case sameTrust(&p[i], at(i+1)):
			return merge(i, true), false // write i+1 changed nothing judged
		}
	}
	seen := make(map[trustKey]int, n)
	for i := range p {
		if p[i].cur != nil {
			seen[p[i].key]++
		}
	}
	for i := n - 1; i >= 1; i-- {
		if p[i].cur != nil && seen[p[i].key] > 1 {
			return merge(i, false), false // another pending write has its state
		}
	}
	return merge(n-1, false), true
}
