package records

import "strings"

// maxRecordedWrites bounds the writes a report remembers (17 bytes each in
// its annotation): far more than one configuration's writes between two
// flushes of the replicas that record them (the 8-writer incident: 683
// audited writes in 20 s).
const maxRecordedWrites = 2048

// recordedWrites are the writes a report counted: a set, and the order
// they were counted in so that the oldest are forgotten first.
type recordedWrites struct {
	set   map[string]struct{}
	order []string
}

func parseRecordedWrites(s string) *recordedWrites {
	r := &recordedWrites{set: map[string]struct{}{}, order: strings.Fields(s)}
	for _, w := range r.order {
		r.set[w] = struct{}{}
	}
	return r
}

// unseen returns d counting only the writes not counted yet (nil when none
// is left), and remembers them. A write admission decided and the observer
// saw arrives as two deltas with the same write key: whichever is merged
// first counts it. Counts without a write key are kept as they are.
func (r *recordedWrites) unseen(d *delta) *delta {
	if len(d.writes) == 0 {
		return d
	}
	dup := 0
	for _, w := range d.writes {
		if _, ok := r.set[w]; ok {
			dup++
			continue
		}
		r.set[w] = struct{}{}
		r.order = append(r.order, w)
	}
	if over := len(r.order) - maxRecordedWrites; over > 0 {
		for _, w := range r.order[:over] {
			delete(r.set, w)
		}
		r.order = append([]string(nil), r.order[over:]...)
	}
	if dup == 0 {
		return d
	}
	if dup >= int(d.count) {
		return nil
	}
	out := *d
	out.count -= int64(dup)
	return &out
}

func (r *recordedWrites) String() string { return strings.Join(r.order, " ") }
