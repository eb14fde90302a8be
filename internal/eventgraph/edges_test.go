package eventgraph_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/storetest"
)

// The edges derived from one request's events are the model's edges among
// them, the ones the stores write.
func TestRequestEdges(t *testing.T) {
	var failing []eventgraph.Event
	for _, e := range storetest.Fixture() {
		if e.ReqID == storetest.ReqFailing {
			failing = append(failing, e)
		}
	}
	ids := map[string]bool{}
	for _, e := range failing {
		ids[e.ID] = true
	}
	var want []eventgraph.Edge
	for _, e := range storetest.FixtureEdges() {
		if ids[e.From] && ids[e.To] {
			want = append(want, e)
		}
	}
	assert.ElementsMatch(t, want, eventgraph.RequestEdges(failing))
}
