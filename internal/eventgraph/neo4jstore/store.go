// Package neo4jstore writes and reads the event graph in Neo4j 5 over Bolt.
//
// Every write is a MERGE on a node's identity (Event.event_id, Request.req_id,
// the dimension values) in UNWIND statements that take all data as parameters;
// a batch is written in transactions of at most MaxRows events each. A
// reference to an event not written yet (a cause, a root span) is MERGEd as a
// placeholder Event holding only its event_id, and filled when its record
// arrives; readers skip placeholders (no time).
package neo4jstore // import "github.com/loom-otel/loom/internal/eventgraph/neo4jstore"

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
	"github.com/neo4j/neo4j-go-driver/v5/neo4j/config"

	"github.com/loom-otel/loom/internal/eventgraph"
)

// Config says where the graph is and how it is written.
type Config struct {
	// URI is the Bolt address: bolt://, bolt+s://, neo4j:// or neo4j+s://.
	URI      string
	Username string
	Password string
	// Database is the database name; empty: the server's default.
	Database string
	// TLS configures encrypted schemes (+s); nil uses the system's roots.
	TLS *tls.Config
	// MaxRows is the most events one transaction writes.
	MaxRows int
	// UserAgent identifies the writer to the server.
	UserAgent string
	// OnReject, when set, is told of each event Write refused (see eventgraph.RejectFunc).
	OnReject eventgraph.RejectFunc
}

// driverRetryTime bounds the driver's own retries of one transaction.
const driverRetryTime = 2 * time.Second

// Store is the event graph in a Neo4j (or Bolt-compatible) database.
type Store struct {
	driver   neo4j.DriverWithContext
	database string
	maxRows  int
	onReject eventgraph.RejectFunc

	schemaMu    sync.Mutex
	schemaReady bool
}

var (
	_ eventgraph.Backend   = (*Store)(nil)
	_ eventgraph.Adjacency = (*Store)(nil)
)

// Open creates the driver; it does not connect (EnsureSchema and the first write do).
func Open(cfg Config) (*Store, error) {
	if cfg.MaxRows < 1 {
		return nil, fmt.Errorf("neo4jstore: MaxRows %d must be at least 1", cfg.MaxRows)
	}
	driver, err := neo4j.NewDriverWithContext(cfg.URI, neo4j.BasicAuth(cfg.Username, cfg.Password, ""), func(c *config.Config) {
		c.TlsConfig = cfg.TLS
		// The driver retries a transaction in place briefly (deadlocks, a leader
		// change); outages are the caller's to retry (exporterhelper's queue).
		c.MaxTransactionRetryTime = driverRetryTime
		if cfg.UserAgent != "" {
			c.UserAgent = cfg.UserAgent
		}
	})
	if err != nil {
		return nil, fmt.Errorf("neo4jstore: %w", err)
	}
	return &Store{driver: driver, database: cfg.Database, maxRows: cfg.MaxRows, onReject: cfg.OnReject}, nil
}

// Close closes the driver's connections.
func (s *Store) Close(ctx context.Context) error { return s.driver.Close(ctx) }

// schema creates the constraints every MERGE relies on and the indexes the
// edge derivation and the readers use. IF NOT EXISTS makes it idempotent.
var schema = []string{
	`CREATE CONSTRAINT loom_event_id IF NOT EXISTS FOR (e:Event) REQUIRE e.event_id IS UNIQUE`,
	`CREATE CONSTRAINT loom_request_id IF NOT EXISTS FOR (r:Request) REQUIRE r.req_id IS UNIQUE`,
	`CREATE INDEX loom_event_request_time IF NOT EXISTS FOR (e:Event) ON (e.req_id, e.time)`,
	`CREATE INDEX loom_event_time IF NOT EXISTS FOR (e:Event) ON (e.time)`,
	`CREATE INDEX loom_event_span IF NOT EXISTS FOR (e:Event) ON (e.span_key)`,
	`CREATE INDEX loom_event_parent IF NOT EXISTS FOR (e:Event) ON (e.parent_key)`,
	`CREATE INDEX loom_request_first IF NOT EXISTS FOR (r:Request) ON (r.first_time)`,
}

func init() {
	for _, d := range dimensions {
		schema = append(schema, `CREATE CONSTRAINT loom_`+strings.ToLower(string(d.dim))+` IF NOT EXISTS FOR (d:`+
			string(d.dim)+`) REQUIRE d.`+d.key+` IS UNIQUE`)
	}
}

// EnsureSchema creates the constraints and indexes once; after a failure
// (the database unreachable) the next call tries again.
func (s *Store) EnsureSchema(ctx context.Context) error {
	s.schemaMu.Lock()
	defer s.schemaMu.Unlock()
	if s.schemaReady {
		return nil
	}
	for _, stmt := range schema {
		if _, err := neo4j.ExecuteQuery(ctx, s.driver, stmt, nil, neo4j.EagerResultTransformer,
			neo4j.ExecuteQueryWithDatabase(s.database)); err != nil {
			return classify(fmt.Errorf("neo4jstore: create schema: %w", err))
		}
	}
	s.schemaReady = true
	return nil
}

// classify marks the errors that retrying cannot fix: the server rejected the
// statement or the data (a bug here). Unreachable servers, timeouts, transient
// and security errors (credentials can be fixed) stay retryable.
func classify(err error) error {
	var n *neo4j.Neo4jError
	if errors.As(err, &n) {
		for _, prefix := range []string{"Neo.ClientError.Statement.", "Neo.ClientError.Schema.", "Neo.ClientError.Request."} {
			if strings.HasPrefix(n.Code, prefix) {
				return eventgraph.Permanent(err)
			}
		}
	}
	var usage *neo4j.UsageError
	if errors.As(err, &usage) {
		return eventgraph.Permanent(err)
	}
	return err
}

// session opens a session on the configured database.
func (s *Store) session(ctx context.Context, mode neo4j.AccessMode) neo4j.SessionWithContext {
	return s.driver.NewSession(ctx, neo4j.SessionConfig{DatabaseName: s.database, AccessMode: mode})
}

// dimension is how one dimension is stored: a node label, its key property and the membership edge.
type dimension struct {
	dim  eventgraph.Dimension
	key  string
	edge string
}

var dimensions = []dimension{
	{eventgraph.DimModel, "model_ver", "USES_MODEL"},
	{eventgraph.DimInputHash, "input_hash", "HAS_INPUT"},
	{eventgraph.DimGPU, "id", "ON_GPU"},
	{eventgraph.DimService, "name", "FROM_SERVICE"},
	{eventgraph.DimHost, "name", "ON_HOST"},
}
