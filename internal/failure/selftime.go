package failure

import (
	"cmp"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// SpanTiming is what a span of a request tells of where its time went.
// Stage is its stage attribute ("" when it has none): its place is named by
// its span name then, as Latency.Check names a span's.
type SpanTiming struct {
	Span, Parent                pcommon.SpanID
	Start, End                  pcommon.Timestamp
	Service, Stage, Name, Model string
}

// SelfTimes returns, for each span of one request that has children among
// spans, its own time in ms: its duration less the time its children cover
// (their union, clipped to the span, so that parallel calls and a child's
// clock skew count once and never below zero); -1 for a span with no child
// among them, whose own time is its duration.
func SelfTimes(spans []SpanTiming) []float64 {
	out := make([]float64, len(spans))
	// Each child's parent, then the children in order of parent and start:
	// two allocations for a request, whatever its size.
	order := make([]int32, 0, len(spans))
	parentOf := make([]int32, len(spans))
	for i := range spans {
		out[i], parentOf[i] = -1, -1
		if spans[i].Parent.IsEmpty() {
			continue
		}
		for j := range spans {
			if j != i && spans[j].Span == spans[i].Parent {
				parentOf[i] = int32(j)
				order = append(order, int32(i))
				break
			}
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(parentOf[a], parentOf[b]); c != 0 {
			return c
		}
		return cmp.Compare(spans[a].Start, spans[b].Start)
	})
	for at := 0; at < len(order); {
		p := parentOf[order[at]]
		parent := &spans[p]
		var covered pcommon.Timestamp
		reach := parent.Start
		for ; at < len(order) && parentOf[order[at]] == p; at++ {
			child := &spans[order[at]]
			start, end := max(child.Start, reach), min(child.End, parent.End)
			if end > start {
				covered += end - start
				reach = end
			}
		}
		if parent.End > parent.Start {
			out[p] = float64(parent.End-parent.Start-covered) / 1e6
		}
	}
	return out
}
