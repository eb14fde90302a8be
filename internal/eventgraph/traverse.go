package eventgraph

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// Bounds of a neighbourhood: past a few hops every request of a busy service is
// reachable, and a reader wants an answer, not the whole graph.
const (
	MaxDepth         = 6
	MaxNeighbourhood = 1000
)

// ErrNotFound: the store holds no event with that id.
var ErrNotFound = errors.New("eventgraph: event not found")

// Adjacency is what a store supplies to Traverse.
type Adjacency interface {
	// Adjacent returns the event-to-event edges that touch the given events and
	// whose other end is a stored event (not a dangling reference).
	Adjacent(ctx context.Context, ids []string) ([]Edge, error)
	// Events returns the stored events among ids, in any order.
	Events(ctx context.Context, ids []string) ([]Event, error)
}

// Traverse walks breadth-first from start, following edges both ways, and
// returns the events within depth hops (at most MaxNeighbourhood of them) with
// every edge between them, sorted: events by time then id, edges by their fields.
// Every store answers Neighbourhood with it, so answers agree across backends.
func Traverse(ctx context.Context, a Adjacency, start string, depth int) (Graph, error) {
	if depth < 0 || depth > MaxDepth {
		return Graph{}, fmt.Errorf("eventgraph: depth %d is out of range 0..%d", depth, MaxDepth)
	}
	seen := map[string]bool{start: true}
	ids := []string{start}
	var g Graph
	edges := map[Edge]bool{}
	frontier := ids
	for hop := 0; len(frontier) > 0; hop++ {
		adjacent, err := a.Adjacent(ctx, frontier)
		if err != nil {
			return Graph{}, err
		}
		var next []string
		for _, e := range adjacent {
			if hop < depth {
				for _, id := range [2]string{e.From, e.To} {
					if seen[id] {
						continue
					}
					if len(ids) == MaxNeighbourhood {
						g.Truncated = true
						continue
					}
					seen[id] = true
					ids = append(ids, id)
					next = append(next, id)
				}
			}
			if seen[e.From] && seen[e.To] {
				edges[e] = true
			}
		}
		if hop == depth {
			break // the last hop only collected the edges among the events found
		}
		frontier = next
	}
	events, err := a.Events(ctx, ids)
	if err != nil {
		return Graph{}, err
	}
	if !slices.ContainsFunc(events, func(e Event) bool { return e.ID == start }) {
		return Graph{}, ErrNotFound
	}
	SortEvents(events)
	g.Events = events
	for e := range edges {
		g.Edges = append(g.Edges, e)
	}
	slices.SortFunc(g.Edges, func(x, y Edge) int {
		return cmp.Or(cmp.Compare(x.From, y.From), cmp.Compare(x.To, y.To), cmp.Compare(x.Type, y.Type),
			cmp.Compare(x.CauseType, y.CauseType), cmp.Compare(x.Rule, y.Rule))
	})
	return g, nil
}

// SortEvents sorts events by time, then id: the order of a timeline and of NEXT edges.
func SortEvents(events []Event) {
	slices.SortFunc(events, func(x, y Event) int {
		return cmp.Or(x.Time.Compare(y.Time), cmp.Compare(x.ID, y.ID))
	})
}
