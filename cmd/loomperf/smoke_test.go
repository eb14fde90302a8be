//go:build e2e

package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSmoke runs the system benchmark short (5k records/s, 10 s, one
// repetition) against the built collector: every pipeline starts, accepts
// traffic, and the report has every row. It asserts nothing about speed.
// builtCollector is the collector binary under test.
func builtCollector(t *testing.T) string {
	bin := os.Getenv("LOOM_BIN")
	require.NotEmpty(t, bin, "LOOM_BIN names the built collector (make e2e sets it)")
	return bin
}

func TestSmoke(t *testing.T) {
	bin := builtCollector(t)
	var out, progress strings.Builder
	err := runMain([]string{"-bin", bin, "-repo", "../..", "-loads", "5000", "-reps", "1", "-warmup", "2s", "-window", "10s"}, &out, &progress)
	require.NoError(t, err, "%s\n%s", progress.String(), out.String())
	for _, p := range pipelines {
		assert.Contains(t, out.String(), "| "+p.name+" | 5k/s | 1 |")
		assert.Contains(t, out.String(), "| 5k/s | "+p.name+" |")
	}
	assert.Contains(t, out.String(), "| 5k/s | CPU per 10k records |")
	assert.Contains(t, out.String(), "| Go heap in use by component")
}
