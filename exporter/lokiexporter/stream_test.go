package lokiexporter

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStreamsSorted(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	labelsB := []label{{"level", "info"}, {"service_name", "b"}}
	labelsA := []label{{"level", ""}, {"service_name", "a"}}
	s := streams{}
	s.add(appendLabelSet(nil, labelsB), labelsB, push.Entry{Timestamp: t0.Add(2 * time.Second), Line: "late"})
	s.add(appendLabelSet(nil, labelsB), labelsB, push.Entry{Timestamp: t0, Line: "early"})
	s.add(appendLabelSet(nil, labelsB), labelsB, push.Entry{Timestamp: t0, Line: "early, second"})
	s.add(appendLabelSet(nil, labelsA), labelsA, push.Entry{Timestamp: t0, Line: "a"})

	got := s.sorted()
	require.Len(t, got, 2)
	assert.Equal(t, `{level="info", service_name="b"}`, got[0].key, "streams in label-set order")
	assert.Equal(t, `{service_name="a"}`, got[1].key)
	assert.Equal(t, []label{{"service_name", "a"}}, got[1].labels, "empty labels are left out")
	var lines []string
	for _, e := range got[0].entries {
		lines = append(lines, e.Line)
	}
	assert.Equal(t, []string{"early", "early, second", "late"}, lines, "time order, stable for equal timestamps")
}

func testStreams() []*stream {
	t0 := time.Unix(1_700_000_000, 5)
	return []*stream{{
		key:    `{level="error", service_name="model"}`,
		labels: []label{{"level", "error"}, {"service_name", "model"}},
		entries: []push.Entry{{
			Timestamp:          t0,
			Line:               `{"body":"oom"}`,
			StructuredMetadata: push.LabelsAdapter{{Name: "req_id", Value: "req-1715234890123-a1b2c3"}},
		}},
	}}
}

func TestEncodeProtobuf(t *testing.T) {
	enc := &encoder{encoding: EncodingProtobuf}
	body, err := enc.encode(testStreams())
	require.NoError(t, err)
	raw, err := snappy.Decode(nil, body)
	require.NoError(t, err)
	var req push.PushRequest
	require.NoError(t, req.Unmarshal(raw))
	require.Len(t, req.Streams, 1)
	assert.Equal(t, `{level="error", service_name="model"}`, req.Streams[0].Labels)
	require.Len(t, req.Streams[0].Entries, 1)
	e := req.Streams[0].Entries[0]
	assert.Equal(t, time.Unix(1_700_000_000, 5).UnixNano(), e.Timestamp.UnixNano())
	assert.Equal(t, `{"body":"oom"}`, e.Line)
	assert.Equal(t, push.LabelsAdapter{{Name: "req_id", Value: "req-1715234890123-a1b2c3"}}, e.StructuredMetadata)
}

func TestEncodeJSON(t *testing.T) {
	enc := &encoder{encoding: EncodingJSON}
	body, err := enc.encode(testStreams())
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(body, &got), string(body))
	assert.Equal(t, map[string]any{"streams": []any{map[string]any{
		"stream": map[string]any{"level": "error", "service_name": "model"},
		"values": []any{[]any{"1700000000000000005", `{"body":"oom"}`, map[string]any{"req_id": "req-1715234890123-a1b2c3"}}},
	}}}, got)
}

func BenchmarkStreamsAddSorted(b *testing.B) {
	t0 := time.Unix(1_700_000_000, 0)
	sets := make([][]label, 8)
	keys := make([][]byte, len(sets))
	for i := range sets {
		sets[i] = []label{{"level", "info"}, {"service_name", string(rune('a' + i))}}
		keys[i] = appendLabelSet(nil, sets[i])
	}
	for b.Loop() {
		s := streams{}
		for i := range benchRecords {
			// Slightly out of order within each stream, as batches from several pods are.
			s.add(keys[i%len(keys)], sets[i%len(sets)], push.Entry{Timestamp: t0.Add(time.Duration(i^3) * time.Millisecond)})
		}
		s.sorted()
	}
	b.ReportMetric(float64(benchRecords*b.N)/b.Elapsed().Seconds(), "records/s")
}
