//go:generate ../../.tools/mdatagen metadata.yaml

// Package eventgraphexporter writes the request event graph (ARCHITECTURE.md
// §5) from logs and spans: to an embedded SQLite file (the default, for single
// nodes) or to Neo4j over Bolt. Every write is an idempotent upsert keyed by
// event.id, so retries and replays never duplicate nodes or edges.
package eventgraphexporter // import "github.com/loom-otel/loom/exporter/eventgraphexporter"
