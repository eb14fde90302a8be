// Package foundry is a second family of workloads, written to be unlike the
// loom family of internal/workload: an inference platform with its own
// services and topology, stage and attribute names, log formats (Python
// logging, Go slog text and JSON, log4j lines with stack traces split into
// records, structlog JSON without a severity number, logfmt with lvl=, plain
// text), healthy categorical variety, and eight incidents of which five leave
// no error signal anywhere. It produces the same request model
// (workload.Request with its workload.Truth), so workload.Send, ToPdata and
// every test helper built on them work unchanged.
//
// Loom's detectors must not know any of this family's names: Vocabulary lists
// them for a test that asserts so. README.md of cmd/loomgen describes the
// traffic and the incidents.
package foundry
