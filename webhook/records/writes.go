package records

import (
	"strings"
)

// maxRecordedWrites bounds the writes a report remembers (about 17 bytes
// each in its annotation, 30 for one the observer counted): far more than
// one configuration's writes between two flushes of the replicas that
// record them (the 8-writer incident: 683 audited writes in 20 s).
const maxRecordedWrites = 1024

// resultRefLen is how much of a result ID (resultID) a remembered write keeps to find
// the observed result that counted it.
const resultRefLen = 12

// recordedWrites are the writes a report counted, with, for a write only
// the observer counted so far, the result that counted it; and the order
// they were counted in, so that the oldest are forgotten first.
type recordedWrites struct {
	byKey map[string]string // write key -> observed result ("" once admission counted it)
	order []string
}

func parseRecordedWrites(s string) *recordedWrites {
	r := &recordedWrites{byKey: map[string]string{}}
	for f := range strings.FieldsSeq(s) {
		k, ref, _ := strings.Cut(f, "=")
		if _, dup := r.byKey[k]; !dup {
			r.order = append(r.order, k)
		}
		r.byKey[k] = ref
	}
	return r
}

// admit counts a delta's writes for one result and returns d as it counts.
//
// Admission's decisions always count: each is a request the guard answered
// (two concurrent requests can be decided against the same stored object,
// and a retried one is decided again). When the observer counted one of
// their writes first (on another replica's earlier flush), that count is
// taken back: the result ID prefixes returned name the observed results to
// decrement, once per write.
//
// The observer's sightings count only writes nothing counted yet: a write
// admission decided is the same write the observer saw stored.
func (r *recordedWrites) admit(d *delta, resultID string) (counted *delta, takeBack []string) {
	if len(d.writes) == 0 {
		return d, nil
	}
	if d.key.Origin == "" {
		for _, w := range d.writes {
			ref, ok := r.byKey[w]
			if ok && ref != "" {
				takeBack = append(takeBack, ref)
			}
			r.remember(w, "", ok)
		}
		return d, takeBack
	}
	dup := 0
	for _, w := range d.writes {
		if _, ok := r.byKey[w]; ok {
			dup++
			continue
		}
		r.remember(w, resultID[:min(resultRefLen, len(resultID))], false)
	}
	if dup == 0 {
		return d, nil
	}
	if dup >= int(d.count) {
		return nil, nil
	}
	out := *d
	out.count -= int64(dup)
	return &out, nil
}

func (r *recordedWrites) remember(w, ref string, known bool) {
	r.byKey[w] = ref
	if known {
		return
	}
	r.order = append(r.order, w)
	if over := len(r.order) - maxRecordedWrites; over > 0 {
		for _, old := range r.order[:over] {
			delete(r.byKey, old)
		}
		r.order = append([]string(nil), r.order[over:]...)
	}
}

func (r *recordedWrites) String() string {
	var b strings.Builder
	for i, w := range r.order {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		if ref := r.byKey[w]; ref != "" {
			b.WriteString("=" + ref)
		}
	}
	return b.String()
}
