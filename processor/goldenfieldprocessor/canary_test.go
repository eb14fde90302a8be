package goldenfieldprocessor

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/canarytest"
)

const canary = "CANARY7f3a"

// runPayloads sends one log payload and one span payload through a processor
// built from cfg and returns both, marshalled whole as OTLP JSON.
func runPayloads(t testing.TB, cfg *Config, ld plog.Logs, td ptrace.Traces) (logsJSON, tracesJSON string) {
	t.Helper()
	ctx := context.Background()
	logsSink, tracesSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
	lp, err := NewFactory().CreateLogs(ctx, settings(nil), cfg, logsSink)
	require.NoError(t, err)
	tp, err := NewFactory().CreateTraces(ctx, settings(nil), cfg, tracesSink)
	require.NoError(t, err)
	require.NoError(t, lp.ConsumeLogs(ctx, ld))
	require.NoError(t, tp.ConsumeTraces(ctx, td))
	require.NoError(t, lp.Shutdown(ctx))
	require.NoError(t, tp.Shutdown(ctx))
	for _, out := range logsSink.AllLogs() {
		b, err := (&plog.JSONMarshaler{}).MarshalLogs(out)
		require.NoError(t, err)
		logsJSON += string(b)
	}
	for _, out := range tracesSink.AllTraces() {
		b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(out)
		require.NoError(t, err)
		tracesJSON += string(b)
	}
	return logsJSON, tracesJSON
}

// No prompt or completion leaves the processor, wherever a log record or span
// carries it, and the plain fields next to it do.
func TestCanaryContentNeverLeaves(t *testing.T) {
	for _, mode := range []RedactionMode{RedactionRemove, RedactionMask} {
		cfg := defaultConfig()
		cfg.Redaction.Mode = mode
		for _, pl := range canarytest.Placements() {
			for _, key := range canarytest.ContentKeys {
				t.Run(fmt.Sprintf("%s/%s/%s", mode, pl.Name, key), func(t *testing.T) {
					assertNoCanary(t, cfg, pl, key, "say "+canary+" please", canary)
				})
			}
		}
	}
}

// The body patterns mask PII in every string placement, under a plain key.
func TestCanaryPIINeverLeaves(t *testing.T) {
	for _, pl := range canarytest.Placements() {
		for _, pii := range canarytest.PIIValues {
			t.Run(pl.Name+"/"+pii, func(t *testing.T) {
				assertNoCanary(t, defaultConfig(), pl, "note", pii, canarytest.PIISecret(pii))
			})
		}
	}
}

func assertNoCanary(t *testing.T, cfg *Config, pl canarytest.Placement, key, value, secret string) {
	t.Helper()
	ld, _, td, _ := pl.Place(key, value)
	logsJSON, tracesJSON := runPayloads(t, cfg, ld, td)
	for signal, out := range map[string]string{"logs": logsJSON, "traces": tracesJSON} {
		require.NotContains(t, out, secret, "%s leaked in %s", secret, signal)
		require.NotEmpty(t, out)
	}
	for _, placed := range []struct {
		used bool
		out  string
	}{{pl.Logs != nil, logsJSON}, {pl.Spans != nil, tracesJSON}} {
		if !placed.used {
			continue
		}
		for _, k := range canarytest.SurvivorKeys {
			assert.Contains(t, placed.out, k)
		}
	}
}

// A span event that says it carries content has its content redacted, under
// whatever key the event uses for it; its plain attributes stay.
func TestCanaryContentEvents(t *testing.T) {
	for name, key := range canarytest.ContentEvents {
		t.Run(name, func(t *testing.T) {
			td, sp := canarytest.NewSpanParts()
			e := sp.Span.Events().AppendEmpty()
			e.SetName(name)
			e.Attributes().PutStr("gen_ai.system", "openai")
			e.Attributes().PutInt("index", 0)
			e.Attributes().PutStr(key, canary)
			e.Attributes().PutEmptyMap("message").PutStr("content", canary)
			_, out := runPayloads(t, defaultConfig(), plog.NewLogs(), td)
			require.NotContains(t, out, canary)
			assert.Contains(t, out, "openai")
			assert.Contains(t, out, name)
		})
	}
	t.Run("message outside a content event is kept", func(t *testing.T) {
		td, sp := canarytest.NewSpanParts()
		e := sp.Span.Events().AppendEmpty()
		e.SetName("exception")
		e.Attributes().PutStr("exception.message", "boom")
		_, out := runPayloads(t, defaultConfig(), plog.NewLogs(), td)
		assert.Contains(t, out, "boom")
	})
}
