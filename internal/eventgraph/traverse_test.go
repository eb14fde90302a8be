package eventgraph

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// star is a hub event with an edge to each of n spokes.
type star struct{ n int }

func spoke(i int) string { return fmt.Sprintf("spoke-%05d", i) }

func (s star) Adjacent(_ context.Context, ids []string) ([]Edge, error) {
	var out []Edge
	for _, id := range ids {
		if id == "hub" {
			for i := range s.n {
				out = append(out, Edge{From: spoke(i), To: "hub", Type: EdgeCaused})
			}
		}
	}
	return out, nil
}

func (s star) Events(_ context.Context, ids []string) ([]Event, error) {
	out := make([]Event, len(ids))
	for i, id := range ids {
		out[i] = Event{ID: id}
	}
	return out, nil
}

func TestTraverseIsBounded(t *testing.T) {
	g, err := Traverse(context.Background(), star{n: 1500}, "hub", 2)
	require.NoError(t, err)
	assert.True(t, g.Truncated)
	assert.Len(t, g.Events, MaxNeighbourhood)
	assert.Len(t, g.Edges, MaxNeighbourhood-1, "only edges between events of the answer")

	g, err = Traverse(context.Background(), star{n: 10}, "hub", 1)
	require.NoError(t, err)
	assert.False(t, g.Truncated)
	assert.Len(t, g.Events, 11)

	_, err = Traverse(context.Background(), star{n: 10}, "hub", MaxDepth+1)
	assert.Error(t, err)
}

func TestRequestsFoldIdempotently(t *testing.T) {
	t0 := time.Date(2025, 5, 9, 12, 0, 0, 0, time.UTC)
	events := []Event{
		{ReqID: "a", Time: t0.Add(time.Second), End: t0.Add(3 * time.Second)},
		{ReqID: "b", Time: t0},
		{ReqID: "a", Time: t0, Failed: true},
		{Time: t0}, // noise: no request
	}
	want := []Request{
		{ReqID: "a", Failed: true, First: t0, Last: t0.Add(3 * time.Second)},
		{ReqID: "b", First: t0, Last: t0},
	}
	assert.Equal(t, want, Requests(events))
	assert.Equal(t, want, Requests(append(events, events...)), "folding twice changes nothing")
}
