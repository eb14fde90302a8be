package lokiexporter

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/exporter/lokiexporter/internal/metadatatest"
	"github.com/loom-otel/loom/internal/golden"
)

// received is one push as Loki's push API sees it.
type received struct {
	tenant      string
	contentType string
	req         push.PushRequest
	at          time.Time
}

// fakeLoki decodes every push as documented for /loki/api/v1/push and answers
// with respond (204 when nil), given the tenant's attempt number from 0.
type fakeLoki struct {
	t       *testing.T
	respond func(attempt int, r received) (status int, header http.Header, body string)

	mu       sync.Mutex
	pushes   []received
	attempts map[string]int
}

func (f *fakeLoki) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	require.NoError(f.t, err)
	got := received{tenant: r.Header.Get("X-Scope-OrgID"), contentType: r.Header.Get("Content-Type"), at: time.Now()}
	assert.Equal(f.t, "/loki/api/v1/push", r.URL.Path)
	switch got.contentType {
	case "application/x-protobuf":
		raw, err := snappy.Decode(nil, body)
		require.NoError(f.t, err, "protobuf pushes are snappy block-compressed")
		require.NoError(f.t, got.req.Unmarshal(raw))
	case "application/json":
		got.req = decodeJSONPush(f.t, body)
	default:
		f.t.Errorf("unexpected Content-Type %q", got.contentType)
	}
	f.mu.Lock()
	if f.attempts == nil {
		f.attempts = map[string]int{}
	}
	attempt := f.attempts[got.tenant]
	f.attempts[got.tenant]++
	f.pushes = append(f.pushes, got)
	f.mu.Unlock()

	status, header, text := http.StatusNoContent, http.Header{}, ""
	if f.respond != nil {
		status, header, text = f.respond(attempt, got)
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

func (f *fakeLoki) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.pushes...)
}

// decodeJSONPush reads Loki's documented JSON push into the protobuf types.
func decodeJSONPush(t *testing.T, body []byte) push.PushRequest {
	var doc struct {
		Streams []struct {
			Stream map[string]string `json:"stream"`
			Values [][]json.RawMessage
		} `json:"streams"`
	}
	require.NoError(t, json.Unmarshal(body, &doc))
	var req push.PushRequest
	for _, s := range doc.Streams {
		var labels []label
		for _, name := range slices.Sorted(maps.Keys(s.Stream)) {
			labels = append(labels, label{name, s.Stream[name]})
		}
		st := push.Stream{Labels: string(appendLabelSet(nil, labels))}
		for _, v := range s.Values {
			var ns, line string
			require.NoError(t, json.Unmarshal(v[0], &ns))
			require.NoError(t, json.Unmarshal(v[1], &line))
			nanos, err := strconv.ParseInt(ns, 10, 64)
			require.NoError(t, err)
			e := push.Entry{Timestamp: time.Unix(0, nanos), Line: line}
			if len(v) > 2 {
				var md map[string]string
				require.NoError(t, json.Unmarshal(v[2], &md))
				for name, value := range md {
					e.StructuredMetadata = append(e.StructuredMetadata, push.LabelAdapter{Name: name, Value: value})
				}
			}
			st.Entries = append(st.Entries, e)
		}
		req.Streams = append(req.Streams, st)
	}
	return req
}

func newTestExporter(t *testing.T, cfg *Config, loki *fakeLoki) (exporter.Logs, *componenttest.Telemetry) {
	t.Helper()
	srv := httptest.NewServer(loki)
	t.Cleanup(srv.Close)
	cfg.ClientConfig.Endpoint = srv.URL
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	exp, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tt), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(context.Background())) })
	return exp, tt
}

// synchronous: no queue and no retry, so ConsumeLogs returns the push's own error.
func synchronous(cfg *Config) *Config {
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	return cfg
}

func TestPushConformance(t *testing.T) {
	for _, encoding := range []Encoding{EncodingProtobuf, EncodingJSON} {
		t.Run(string(encoding), func(t *testing.T) {
			loki := &fakeLoki{t: t}
			cfg := synchronous(testConfig())
			cfg.Encoding = encoding
			exp, _ := newTestExporter(t, cfg, loki)

			ld := testLogs(
				goldenRecord("req-1715234890123-bbbbbb", testNow.Add(time.Second)),
				goldenRecord("req-1715234890123-aaaaaa", testNow),
			)
			appendTenant(ld, "team-a", goldenRecord("req-1715234890123-cccccc", testNow))
			require.NoError(t, exp.ConsumeLogs(context.Background(), ld))

			pushes := loki.received()
			require.Len(t, pushes, 2, "one push per tenant")
			byTenant := map[string]push.PushRequest{}
			for _, p := range pushes {
				assert.Equal(t, encoding.contentType(), p.contentType)
				byTenant[p.tenant] = p.req
			}
			require.Contains(t, byTenant, "team-a")
			shared := byTenant["shared"]
			require.Len(t, shared.Streams, 1)
			s := shared.Streams[0]
			assert.Equal(t, `{k8s_namespace_name="inference", level="error", model_ver="llama3-8b-v2.1.4", service_name="model", stage_top="model"}`, s.Labels)
			require.Len(t, s.Entries, 2)
			assert.Equal(t, "req-1715234890123-aaaaaa", metadataMap(s.Entries[0])[golden.ReqID], "entries sorted by time")
			assert.Equal(t, "req-1715234890123-bbbbbb", metadataMap(s.Entries[1])[golden.ReqID])
			assert.Equal(t, testNow.UnixNano(), s.Entries[0].Timestamp.UnixNano())
			assert.JSONEq(t, `{"body":"CUDA out of memory","error.type":"oom"}`, s.Entries[0].Line)
			for _, e := range s.Entries {
				md := metadataMap(e)
				for _, name := range []string{golden.ReqID, golden.TraceID, golden.SpanID, golden.InputHash, "event_id", golden.Stage} {
					assert.NotEmpty(t, md[name], "structured metadata %s", name)
				}
			}
			assert.Equal(t, "req-1715234890123-cccccc", metadataMap(byTenant["team-a"].Streams[0].Entries[0])[golden.ReqID])
		})
	}
}

func TestPushResponses(t *testing.T) {
	documented400 := map[string]string{
		reasonLineTooLong:         "max entry size 262144 bytes exceeded for stream {service_name=\"model\"} while adding an entry with length 300000 bytes",
		reasonInvalidLabels:       "error parsing labels {a=\"} with error: unexpected end of input",
		reasonMissingLabels:       "error at least one label pair is required per stream",
		reasonTooFarBehind:        "entry too far behind, entry timestamp is: 2024-05-09T05:00:00Z, oldest acceptable timestamp is: 2024-05-09T05:08:10Z",
		reasonTooOld:              "entry for stream {service_name=\"model\"} has timestamp too old: 2024-01-01T00:00:00Z, oldest acceptable timestamp is: 2024-05-02T06:08:10Z",
		reasonTooFarInFuture:      "entry for stream {service_name=\"model\"} has timestamp too new: 2030-01-01T00:00:00Z",
		reasonMaxLabelNames:       "entry for stream {…} has 16 label names; limit 15",
		reasonLabelNameTooLong:    "stream {…} has label name too long: xxx",
		reasonLabelValueTooLong:   "stream {…} has label value too long: xxx",
		reasonDuplicateLabelNames: "stream {…} has duplicate label name: a",
	}
	for reason, message := range documented400 {
		t.Run("400 "+reason, func(t *testing.T) {
			loki := &fakeLoki{t: t, respond: func(int, received) (int, http.Header, string) {
				return http.StatusBadRequest, nil, message + "\nuser=shared, total ignored: 1 out of 1"
			}}
			exp, tt := newTestExporter(t, synchronous(testConfig()), loki)
			err := exp.ConsumeLogs(context.Background(), testLogs(goldenRecord("req-1715234890123-a1b2c3", testNow)))
			require.Error(t, err)
			assert.True(t, consumererror.IsPermanent(err), "400 is permanent")
			assert.Contains(t, err.Error(), message)
			metadatatest.AssertEqualExporterLokiRequestsRejected(t, tt, []metricdata.DataPoint[int64]{
				{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", reason))},
			}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
		})
	}

	t.Run("401 without a tenant", func(t *testing.T) {
		loki := &fakeLoki{t: t, respond: func(_ int, r received) (int, http.Header, string) {
			if r.tenant == "" {
				return http.StatusUnauthorized, nil, "no org id"
			}
			return http.StatusNoContent, nil, ""
		}}
		cfg := synchronous(testConfig())
		cfg.Tenant.Default = ""
		exp, tt := newTestExporter(t, cfg, loki)
		err := exp.ConsumeLogs(context.Background(), testLogs(goldenRecord("req-1715234890123-a1b2c3", testNow)))
		require.Error(t, err)
		assert.True(t, consumererror.IsPermanent(err))
		assert.Contains(t, err.Error(), "tenant::default")
		metadatatest.AssertEqualExporterLokiRequestsRejected(t, tt, []metricdata.DataPoint[int64]{
			{Value: 1, Attributes: attribute.NewSet(attribute.String("reason", reasonUnauthorized))},
		}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	})

	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status)+" is retried", func(t *testing.T) {
			loki := &fakeLoki{t: t, respond: func(int, received) (int, http.Header, string) {
				return status, http.Header{"Retry-After": {"2"}}, "slow down"
			}}
			exp, _ := newTestExporter(t, synchronous(testConfig()), loki)
			err := exp.ConsumeLogs(context.Background(), testLogs(goldenRecord("req-1715234890123-a1b2c3", testNow)))
			require.Error(t, err)
			assert.False(t, consumererror.IsPermanent(err))
			assert.Equal(t, 2*time.Second, retryDelay(err), "Retry-After is handed to exporterhelper")
		})
	}
}

func TestRetryHonoursRetryAfter(t *testing.T) {
	loki := &fakeLoki{t: t, respond: func(n int, _ received) (int, http.Header, string) {
		if n == 0 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, "ingestion rate limit exceeded"
		}
		return http.StatusNoContent, nil, ""
	}}
	cfg := testConfig()
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.InitialInterval = 10 * time.Millisecond
	exp, _ := newTestExporter(t, cfg, loki)
	require.NoError(t, exp.ConsumeLogs(context.Background(), testLogs(goldenRecord("req-1715234890123-a1b2c3", testNow))))

	pushes := loki.received()
	require.Len(t, pushes, 2)
	assert.GreaterOrEqual(t, pushes[1].at.Sub(pushes[0].at), 900*time.Millisecond, "the retry waits for Retry-After, not the 10ms backoff")
}

func TestRetryOnlyFailedTenants(t *testing.T) {
	loki := &fakeLoki{t: t, respond: func(attempt int, r received) (int, http.Header, string) {
		if r.tenant == "team-b" && attempt == 0 {
			return http.StatusServiceUnavailable, nil, "ingesters not ready"
		}
		return http.StatusNoContent, nil, ""
	}}
	cfg := testConfig()
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.InitialInterval = time.Millisecond
	exp, _ := newTestExporter(t, cfg, loki)
	ld := plog.NewLogs()
	appendTenant(ld, "team-a", func(plog.LogRecord) {})
	appendTenant(ld, "team-b", func(plog.LogRecord) {})
	require.NoError(t, exp.ConsumeLogs(context.Background(), ld))

	pushes := map[string]int{}
	for _, p := range loki.received() {
		pushes[p.tenant]++
	}
	assert.Equal(t, map[string]int{"team-a": 1, "team-b": 2}, pushes, "team-a is not pushed twice")
}

// withHeaders is the context of a request that came with the given headers,
// as a receiver with include_metadata hands it on.
func withHeaders(headers map[string][]string) context.Context {
	return client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(headers)})
}

// TestClientMetadataChoosesTheTenant: a request's x-scope-orgid header picks
// the tenant of its records over their resource attribute, through the queue's
// batches, partitioned by it; without the header the attribute applies, and an
// invalid or repeated header drops the records, counted.
func TestClientMetadataChoosesTheTenant(t *testing.T) {
	loki := &fakeLoki{t: t}
	cfg := testConfig()
	cfg.RetryConfig.Enabled = false // the test shuts the exporter down twice, which its retry sender does not allow
	cfg.Tenant.FromMetadata = "x-scope-orgid"
	cfg.QueueConfig.Get().Batch.Get().Partition.MetadataKeys = []string{"x-scope-orgid"}
	require.NoError(t, cfg.Validate())
	exp, tt := newTestExporter(t, cfg, loki)

	// Each request's record says who sent it in its req_id; its resource names team-c.
	send := func(ctx context.Context, reqID string) {
		ld := plog.NewLogs()
		appendTenant(ld, "team-c", goldenRecord(reqID, testNow))
		require.NoError(t, exp.ConsumeLogs(ctx, ld))
	}
	send(withHeaders(map[string][]string{"x-scope-orgid": {"team-a"}}), "req-1715234890123-aaaaa1")
	send(withHeaders(map[string][]string{"X-Scope-Orgid": {"team-b"}}), "req-1715234890123-bbbbb1")
	send(withHeaders(map[string][]string{"x-scope-orgid": {"team-a"}}), "req-1715234890123-aaaaa2")
	send(context.Background(), "req-1715234890123-ccccc1")
	send(withHeaders(map[string][]string{"x-scope-orgid": {"a/b"}}), "req-1715234890123-dddddd")
	send(withHeaders(map[string][]string{"x-scope-orgid": {"team-a", "team-b"}}), "req-1715234890123-eeeeee")
	require.NoError(t, exp.Shutdown(context.Background()), "Shutdown flushes the queue")

	reqIDs := map[string][]string{}
	for _, p := range loki.received() {
		for _, s := range p.req.Streams {
			for _, e := range s.Entries {
				reqIDs[p.tenant] = append(reqIDs[p.tenant], metadataMap(e)[golden.ReqID])
			}
		}
	}
	slices.Sort(reqIDs["team-a"])
	assert.Equal(t, map[string][]string{
		"team-a": {"req-1715234890123-aaaaa1", "req-1715234890123-aaaaa2"},
		"team-b": {"req-1715234890123-bbbbb1"},
		"team-c": {"req-1715234890123-ccccc1"},
	}, reqIDs)
	assertDropped(t, tt, map[string]int64{dropInvalidTenant: 2})
	assert.Equal(t, int64(4), sentLogRecords(t, tt))
}

func TestPushTelemetry(t *testing.T) {
	loki := &fakeLoki{t: t}
	cfg := synchronous(testConfig())
	cfg.Labels.MaxValuesPerLabel = 1
	cfg.Line.MaxSize = 1024
	exp, tt := newTestExporter(t, cfg, loki)
	ld := testLogs(
		func(lr plog.LogRecord) { lr.Attributes().PutStr(golden.ModelVer, "other-model") },
		func(lr plog.LogRecord) { lr.Body().SetStr(string(make([]byte, 2048))) },
	)
	appendTenant(ld, "a b", func(plog.LogRecord) {})
	require.NoError(t, exp.ConsumeLogs(context.Background(), ld))
	metadatatest.AssertEqualExporterLokiLabelOverflows(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("label", "model_ver"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metadatatest.AssertEqualExporterLokiLinesTruncated(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	metadatatest.AssertEqualExporterLokiRecordsDropped(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("drop_reason", "invalid_tenant"))},
	}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}
