//go:generate ../../.tools/mdatagen metadata.yaml

// Package rcaextension serves Loom's answer to "what happened to this request,
// and which requests are failing?": a web page and a JSON API over the event
// graph that an eventgraph exporter of the same collector writes.
package rcaextension // import "github.com/loom-otel/loom/extension/rcaextension"
