//go:build e2e

package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOverloadStaysWithinTheMemoryBound offers Loom's default pipeline as
// much as the load generator can send (here about four times what the
// pipeline accepts), with memory_limiter and GOMEMLIMIT set small, as
// the config's comments say to set them: the anonymous resident memory must
// stay within the bound they document (GOMEMLIMIT, a quarter more for the
// runtime's slack, plus the embedded store's 96 MiB of page caches), and the
// collector must refuse what it cannot take, so that clients are told.
func TestOverloadStaysWithinTheMemoryBound(t *testing.T) {
	bin := builtCollector(t)
	cfg, err := loomConfig("../..")
	require.NoError(t, err)
	const limitMiB = 256
	limiter := cfg["processors"].(map[string]any)["memory_limiter"].(map[string]any)
	limiter["limit_mib"], limiter["spike_limit_mib"] = limitMiB, limitMiB/4
	t.Setenv("GOMEMLIMIT", "256MiB") // inherited by the collector
	c, err := startCollector(bin, cfg)
	require.NoError(t, err)
	defer func() { _ = c.stop() }()
	l, err := startLoad(c.otlp, 0, 1)
	require.NoError(t, err)
	var peak memory
	for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); {
		require.NoError(t, c.wait(500*time.Millisecond), c.logTail())
		m, err := memoryOf(c.cmd.Process.Pid)
		require.NoError(t, err)
		peak.rss, peak.anon = max(peak.rss, m.rss), max(peak.anon, m.anon)
	}
	l.stop()
	t.Logf("limit_mib %d, GOMEMLIMIT 256MiB: peak anonymous memory %.0f MiB, resident set %.0f MiB (with the binary's text); accepted %d records, refused %d",
		limitMiB, float64(peak.anon)/mib, float64(peak.rss)/mib, l.accepted.Load(), l.refused.Load())
	assert.Positive(t, l.refused.Load(), "the collector refuses what it cannot take, and the client is told")
	assert.Positive(t, l.accepted.Load())
	assert.LessOrEqual(t, float64(peak.anon)/mib, 1.25*limitMiB+96)
}
