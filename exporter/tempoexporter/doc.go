//go:generate ../../.tools/mdatagen metadata.yaml

// Package tempoexporter sends traces to Tempo over OTLP with the core OTLP
// exporters, one per tenant, with the golden fields on every span.
package tempoexporter
