package sqlitestore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/storetest"
)

// TestWriteManyWithRepeatsAndRefusals writes, in one batch of several
// statements' worth, new events, events stored before (some refused as
// another request's, some merged), ids repeated in the batch (merged into
// or refused by what the batch wrote first) and a record of no request.
func TestWriteManyWithRepeatsAndRefusals(t *testing.T) {
	ctx := context.Background()
	var refused []string
	s := open(t, Options{OnReject: func(e eventgraph.Event) { refused = append(refused, e.Message) }})
	event := func(n int, reqID, message string) eventgraph.Event {
		return eventgraph.Event{ID: storetest.ID(n), Kind: eventgraph.KindLog, Time: storetest.T0.Add(time.Duration(n) * time.Millisecond),
			ReqID: reqID, Message: message, Attrs: map[string]any{message: float64(n)}}
	}
	const stored, added = 100, 3 * maxRowsPerStatement
	var held []eventgraph.Event
	for n := range stored {
		held = append(held, event(n, "req-a", "held"))
	}
	require.NoError(t, s.Write(ctx, held))

	var batch, wantRefused []eventgraph.Event
	for k := range added {
		batch = append(batch, event(stored+k, "req-c", "new"))
		if k >= stored {
			continue
		}
		if k%2 == 0 {
			batch = append(batch, event(k, "req-b", "taken"))
			wantRefused = append(wantRefused, batch[len(batch)-1])
		} else {
			batch = append(batch, event(k, "req-a", "merged"))
		}
	}
	again := event(stored+50, "req-c", "again")
	again.Host = "second"
	takenInBatch := event(stored+60, "req-d", "taken in batch")
	anonymous := event(1, "", "anonymous")
	batch = append(batch, again, takenInBatch, anonymous, event(3, "req-a", "merged twice"))
	wantRefused = append(wantRefused, takenInBatch, anonymous)
	require.NoError(t, s.Write(ctx, batch))

	var want []string
	for _, e := range wantRefused {
		want = append(want, e.Message)
	}
	assert.Equal(t, want, refused)
	got, err := s.Events(ctx, []string{storetest.ID(0), storetest.ID(1), storetest.ID(3), storetest.ID(stored + 50), storetest.ID(stored + 60)})
	require.NoError(t, err)
	byID := map[string]eventgraph.Event{}
	for _, e := range got {
		byID[e.ID] = e
	}
	assert.Equal(t, map[string]any{"held": 0.0}, byID[storetest.ID(0)].Attrs, "refused: unchanged")
	assert.Equal(t, "req-a", byID[storetest.ID(1)].ReqID)
	assert.Equal(t, map[string]any{"held": 1.0, "merged": 1.0}, byID[storetest.ID(1)].Attrs, "merged, then the anonymous record refused")
	assert.Equal(t, map[string]any{"held": 3.0, "merged": 3.0, "merged twice": 3.0}, byID[storetest.ID(3)].Attrs)
	assert.Equal(t, "merged twice", byID[storetest.ID(3)].Message)
	assert.Equal(t, "second", byID[storetest.ID(stored+50)].Host)
	assert.Equal(t, map[string]any{"new": float64(stored + 50), "again": float64(stored + 50)}, byID[storetest.ID(stored+50)].Attrs)
	assert.Equal(t, "req-c", byID[storetest.ID(stored+60)].ReqID)
	assert.Equal(t, stored+added, count(t, s, `SELECT count(*) FROM events`))
	requests, err := s.Requests(ctx, storetest.T0, storetest.T0.Add(time.Hour), false)
	require.NoError(t, err)
	var reqIDs []string
	for _, r := range requests {
		reqIDs = append(reqIDs, r.ReqID)
	}
	assert.ElementsMatch(t, []string{"req-a", "req-c"}, reqIDs, "refused records make no request")
}

// TestWriteRepeatedCause: a cause given twice in one statement is stored once.
func TestWriteRepeatedCause(t *testing.T) {
	s := open(t, Options{})
	cause := eventgraph.Cause{EventID: storetest.ID(1), Type: "caused", Rule: "r"}
	require.NoError(t, s.Write(context.Background(), []eventgraph.Event{{ID: storetest.ID(2), Kind: eventgraph.KindLog,
		Time: storetest.T0, ReqID: "req-a", Causes: []eventgraph.Cause{cause, cause}}}))
	assert.Equal(t, 1, count(t, s, `SELECT count(*) FROM caused`))
}
