package neo4jstore

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/neo4jtest"
	"github.com/loom-otel/loom/internal/eventgraph/storetest"
)

// open returns a store on the test server, emptied.
func open(t *testing.T, maxRows int, onReject eventgraph.RejectFunc) (*Store, *neo4jtest.Server) {
	t.Helper()
	srv := neo4jtest.Shared(t)
	srv.Clear(t)
	s, err := Open(Config{URI: srv.URI, Username: neo4jtest.Username, Password: srv.Password, MaxRows: maxRows, OnReject: onReject})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s, srv
}

func TestConformance(t *testing.T) {
	t.Logf("test Neo4j started in %v", neo4jtest.Shared(t).Started)
	storetest.Run(t, func(t *testing.T, onReject eventgraph.RejectFunc) eventgraph.Backend {
		s, _ := open(t, 3, onReject) // small transactions: batches span several of them
		return s
	})
}

// TestGraphInCypher checks the graph as operators see it: labels, edge types
// and counts, unchanged by writing everything again.
func TestGraphInCypher(t *testing.T) {
	ctx := context.Background()
	s, srv := open(t, 1000, nil)
	for range 2 {
		require.NoError(t, s.Write(ctx, storetest.Fixture()))
		for query, want := range map[string]int64{
			`MATCH (e:Event) RETURN count(e)`:                             11,
			`MATCH (e:Event) WHERE e.time IS NULL RETURN count(e)`:        0,
			`MATCH (r:Request) RETURN count(r)`:                           2,
			`MATCH (r:Request {failed: true}) RETURN count(r)`:            1,
			`MATCH (:Event)-[r:IN_REQUEST]->(:Request) RETURN count(r)`:   10,
			`MATCH ()-[r:NEXT]->() RETURN count(r)`:                       8,
			`MATCH ()-[r:CHILD_OF]->() RETURN count(r)`:                   5,
			`MATCH ()-[r:ASYNC_OF]->() RETURN count(r)`:                   1,
			`MATCH (m:Model) RETURN count(m)`:                             2,
			`MATCH (:Event)-[r:USES_MODEL]->(:Model) RETURN count(r)`:     2,
			`MATCH (:Event)-[r:HAS_INPUT]->(:InputHash) RETURN count(r)`:  2,
			`MATCH (:Event)-[r:ON_GPU]->(:GPU) RETURN count(r)`:           2,
			`MATCH (s:Service) RETURN count(s)`:                           6,
			`MATCH (:Event)-[r:FROM_SERVICE]->(:Service) RETURN count(r)`: 11,
			`MATCH (h:Host) RETURN count(h)`:                              3,
			`MATCH (:Event)-[r:ON_HOST]->(:Host) RETURN count(r)`:         11,
			`MATCH (a)-[r:CAUSED {type: 'triggered', rule: 'cache_miss_trigger_inference'}]->(b)
			 WHERE a.stage = 'cache/miss' AND b.stage = 'model/forward' RETURN count(r)`: 1,
		} {
			assert.Equal(t, want, srv.Count(t, query, nil), query)
		}
	}
}

func TestPlaceholdersFilledLater(t *testing.T) {
	ctx := context.Background()
	s, srv := open(t, 1000, nil)
	events := storetest.Fixture()
	require.NoError(t, s.Write(ctx, events[4:5])) // caused by #4, which is not written yet
	assert.Equal(t, int64(1), srv.Count(t, `MATCH (e:Event) WHERE e.time IS NULL RETURN count(e)`, nil))
	require.NoError(t, s.Write(ctx, events))
	assert.Equal(t, int64(0), srv.Count(t, `MATCH (e:Event) WHERE e.time IS NULL RETURN count(e)`, nil))
	assert.Equal(t, int64(1), srv.Count(t, `MATCH ()-[r:CAUSED]->() RETURN count(r)`, nil))
}

// TestNextFollowsAMovedEvent writes an event again later than the rest of
// its request: its old neighbours are joined, and it ends the chain.
func TestNextFollowsAMovedEvent(t *testing.T) {
	ctx := context.Background()
	s, srv := open(t, 1000, nil)
	events := storetest.Fixture()
	require.NoError(t, s.Write(ctx, events))
	moved := events[2] // #3, between #2 and #4
	moved.Time = moved.Time.Add(time.Hour)
	require.NoError(t, s.Write(ctx, []eventgraph.Event{moved}))
	chain := []string{storetest.ID(1), storetest.ID(2), storetest.ID(4), storetest.ID(5), storetest.ID(6),
		storetest.ID(7), storetest.ID(8), storetest.ID(3)}
	for i := range chain[:len(chain)-1] {
		assert.Equal(t, int64(1), srv.Count(t, `MATCH (:Event {event_id: $from})-[r:NEXT]->(:Event {event_id: $to}) RETURN count(r)`,
			map[string]any{"from": chain[i], "to": chain[i+1]}), "NEXT %d -> %d", i, i+1)
	}
	assert.Equal(t, int64(len(chain)-1), srv.Count(t, `MATCH (:Event {req_id: $req_id})-[r:NEXT]->() RETURN count(r)`,
		map[string]any{"req_id": storetest.ReqFailing}))
}

func TestSchemaIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s, srv := open(t, 1000, nil)
	require.NoError(t, s.EnsureSchema(ctx))
	again, err := Open(Config{URI: srv.URI, Username: neo4jtest.Username, Password: srv.Password, MaxRows: 10})
	require.NoError(t, err)
	defer func() { _ = again.Close(ctx) }()
	require.NoError(t, again.EnsureSchema(ctx))
	// Every constraint is backed by an index of its name: one index per schema statement.
	assert.Equal(t, int64(len(schema)), srv.Count(t, `SHOW INDEXES YIELD name WHERE name STARTS WITH 'loom_' RETURN count(name)`, nil))
}

func TestUnreachableIsRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	s, err := Open(Config{URI: "bolt://" + addr, Username: "neo4j", Password: "x", MaxRows: 10})
	require.NoError(t, err)
	defer func() { _ = s.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = s.Write(ctx, storetest.Fixture())
	require.Error(t, err)
	assert.False(t, eventgraph.IsPermanent(err), "%v", err)
}

func TestWrongPasswordIsRetryable(t *testing.T) {
	srv := neo4jtest.Shared(t)
	s, err := Open(Config{URI: srv.URI, Username: neo4jtest.Username, Password: "wrong-password", MaxRows: 10})
	require.NoError(t, err)
	defer func() { _ = s.Close(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.Write(ctx, storetest.Fixture())
	require.Error(t, err)
	assert.False(t, eventgraph.IsPermanent(err), "credentials can be fixed while records wait: %v", err)
}
