//go:build e2e

package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/loom-otel/loom/distribution/grafana"
)

// mergeConfig deep-merges a config file over cfg, as the collector merges
// several --config files.
func mergeConfig(t *testing.T, path string) func(map[string]any) {
	return func(cfg map[string]any) {
		raw, err := os.ReadFile(filepath.Join(repoRoot, path))
		if err != nil {
			t.Fatal(err)
		}
		var over map[string]any
		if err := yaml.Unmarshal(raw, &over); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var merge func(dst, src map[string]any)
		merge = func(dst, src map[string]any) {
			for k, v := range src {
				if sub, ok := v.(map[string]any); ok {
					if d, ok := dst[k].(map[string]any); ok {
						merge(d, sub)
						continue
					}
				}
				dst[k] = v
			}
		}
		merge(cfg, over)
	}
}

// TestServingEngineMetrics serves fixtures of vLLM's, TGI's and Triton's
// documented /metrics output, scrapes them with the shipped snippet through
// the built collector, and reads them back from its prometheus exporter; a
// real Prometheus scraping that exporter answers every PromQL target of the
// serving-engines dashboard.
func TestServingEngineMetrics(t *testing.T) {
	prometheusBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("no prometheus binary: `make test-deps` installs Debian's prometheus package")
	}
	targets := map[string]string{}
	for engine := range grafana.ServingEngineMetrics {
		body, err := os.ReadFile(filepath.Join("testdata", "serving", engine+".prom"))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write(body)
		}))
		t.Cleanup(srv.Close)
		targets[engine] = strings.TrimPrefix(srv.URL, "http://")
	}
	exporter := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	startCollector(t, "distribution/config.yaml", withEdits(mergeConfig(t, "distribution/snippets/serving-engines.yaml"), func(cfg map[string]any) {
		mapAt(cfg, "exporters", "prometheus/serving")["endpoint"] = exporter
		jobs := mapAt(cfg, "receivers", "prometheus/serving", "config")["scrape_configs"].([]any)
		for _, j := range jobs {
			job := j.(map[string]any)
			job["scrape_interval"] = "1s"
			job["static_configs"] = []any{map[string]any{"targets": []any{targets[job["job_name"].(string)]}}}
		}
	}))

	var exposed string
	missing := map[string][]string{}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		resp, err := http.Get("http://" + exporter + "/metrics")
		if err != nil {
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		exposed = string(raw)
		clear(missing)
		for engine, names := range grafana.ServingEngineMetrics {
			for _, name := range names {
				if !hasSeries(exposed, name, `job="`+engine+`"`) {
					missing[engine] = append(missing[engine], name)
				}
			}
		}
		if len(missing) == 0 {
			break
		}
	}
	if len(missing) > 0 {
		t.Fatalf("not served under the dashboards' names: %v\nthe exporter served:\n%s", missing, exposed)
	}
	for _, series := range []string{
		`vllm:kv_cache_usage_perc{`, `model_name="meta-llama/Llama-3.1-8B-Instruct"`,
		`nv_trt_llm_kv_cache_block_metrics{`, `kv_cache_block_type="fraction"`, `tgi_batch_inference_duration_bucket{`, `method="prefill"`,
	} {
		if !strings.Contains(exposed, series) {
			t.Errorf("the engines' labels are lost: no %s", series)
		}
	}
	if !hasSeries(exposed, "vllm:kv_cache_usage_perc", "0.6342") {
		t.Errorf("vllm:kv_cache_usage_perc lost its value")
	}

	prometheus := startPrometheus(t, prometheusBin, map[string][]string{"serving": {exporter}})
	withData, _ := checkPromQL(t, prometheus, dashboardQueries(t, func(file string) bool { return file == servingDashboard }))
	t.Logf("%d PromQL targets of %s return data", withData, servingDashboard)
}

// hasSeries reports whether a line of the exposition starts with name{ or
// name (space) and contains want.
func hasSeries(exposition, name, want string) bool {
	for _, line := range strings.Split(exposition, "\n") {
		if (strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ")) && strings.Contains(line, want) {
			return true
		}
	}
	return false
}
