package eventgraph

// RequestEdges returns the event-to-event edges among one request's events,
// given in time order as Timeline returns them, as every store derives them:
// NEXT between consecutive events, CHILD_OF from a span to its parent span and
// from a log record to the span it was logged in, CAUSED from each cause to
// its effect and ASYNC_OF from detached work to its request's primary root.
// A CAUSED or ASYNC_OF edge whose other end is not among the events is kept:
// it names that event by id.
func RequestEdges(events []Event) []Edge {
	var edges []Edge
	spans := make(map[string]string, len(events))
	for i := range events {
		if key := events[i].SpanKey(); key != "" {
			spans[key] = events[i].ID
		}
	}
	for i := range events {
		e := &events[i]
		if i > 0 {
			edges = append(edges, Edge{From: events[i-1].ID, To: e.ID, Type: EdgeNext})
		}
		if parent, ok := spans[e.ParentKey()]; ok && parent != e.ID {
			edges = append(edges, Edge{From: e.ID, To: parent, Type: EdgeChildOf})
		}
		for _, c := range e.Causes {
			edges = append(edges, Edge{From: c.EventID, To: e.ID, Type: EdgeCaused, CauseType: c.Type, Rule: c.Rule})
		}
		if e.AsyncOf != "" {
			edges = append(edges, Edge{From: e.ID, To: e.AsyncOf, Type: EdgeAsyncOf})
		}
	}
	return edges
}
