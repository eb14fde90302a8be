//go:generate ../../.tools/mdatagen metadata.yaml

// Package lokiexporter writes logs to Loki's push API with few, bounded stream
// labels and the golden fields as structured metadata, per tenant.
package lokiexporter
