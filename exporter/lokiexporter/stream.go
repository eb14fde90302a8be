package lokiexporter

import (
	"cmp"
	"slices"

	"github.com/grafana/loki/pkg/push"
)

// stream is one Loki stream of a push: a label set and its entries.
type stream struct {
	key     string  // the label set in Prometheus text form, as the protobuf push carries it
	labels  []label // the same labels, sorted and non-empty, for the JSON push
	entries []push.Entry
}

// streams groups one tenant's entries by label set.
type streams map[string]*stream

// add appends e to the stream with the label set key, creating the stream from
// labels (sorted by name) on first use.
func (s streams) add(key []byte, labels []label, e push.Entry) {
	st, ok := s[string(key)]
	if !ok {
		st = &stream{key: string(key)}
		for _, l := range labels {
			if l.value != "" {
				st.labels = append(st.labels, l)
			}
		}
		s[st.key] = st
	}
	st.entries = append(st.entries, e)
}

// sorted returns the streams ordered by label set, each with its entries in
// time order (stable, so entries with equal timestamps keep their order).
// Loki accepts out-of-order entries only within a window, and in-order pushes
// are cheaper for it.
func (s streams) sorted() []*stream {
	out := make([]*stream, 0, len(s))
	for _, st := range s {
		slices.SortStableFunc(st.entries, func(a, b push.Entry) int { return a.Timestamp.Compare(b.Timestamp) })
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b *stream) int { return cmp.Compare(a.key, b.key) })
	return out
}
