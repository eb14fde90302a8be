package grafana

// ServingEngineMetrics are, per engine, the metric names its documented
// /metrics output has and distribution/snippets/serving-engines.yaml serves
// again under the same names, for this dashboard and the engines' own.
var ServingEngineMetrics = map[string][]string{
	"vllm": {
		"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total",
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
		"vllm:time_to_first_token_seconds_bucket", "vllm:time_per_output_token_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket",
		"vllm:request_queue_time_seconds_bucket", "vllm:request_prefill_time_seconds_bucket", "vllm:request_decode_time_seconds_bucket",
		"vllm:iteration_tokens_total_bucket",
	},
	"tgi": {
		"tgi_queue_size", "tgi_batch_current_size", "tgi_batch_current_max_tokens", "tgi_request_count", "tgi_request_success", "tgi_request_failure",
		"tgi_request_duration_bucket", "tgi_request_queue_duration_bucket", "tgi_request_mean_time_per_token_duration_bucket",
		"tgi_batch_inference_duration_bucket", "tgi_batch_next_size_bucket",
	},
	"triton": {
		"nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count", "nv_inference_exec_count",
		"nv_inference_queue_duration_us", "nv_inference_compute_infer_duration_us", "nv_inference_pending_request_count",
		"nv_inference_first_response_histogram_ms_bucket", "nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics",
		"nv_trt_llm_inflight_batcher_metrics", "nv_gpu_utilization",
	},
}

// servingEngines puts vLLM's, TGI's and Triton's (TensorRT-LLM) metrics side
// by side, one series per engine and instance, as the snippet scrapes them.
func servingEngines() *dashboardBuilder {
	return newDashboard("loom-serving", "Loom / Serving engines",
		"vLLM, Hugging Face TGI and NVIDIA Triton (TensorRT-LLM) as distribution/snippets/serving-engines.yaml scrapes them: queues, KV cache, preemptions, time to first token and per output token, batch sizes, failures.").
		WithRow(row("Load")).
		WithPanel(series("Requests waiting", "Requests queued before a batch takes them.", "short",
			prom{`sum by (instance, model_name) (vllm:num_requests_waiting)`, "vLLM {{instance}} {{model_name}}"},
			prom{`sum by (instance) (tgi_queue_size)`, "TGI {{instance}}"},
			prom{`sum by (instance, model) (nv_inference_pending_request_count)`, "Triton {{instance}} {{model}}"},
			prom{`sum by (instance) (nv_trt_llm_request_metrics{request_type="waiting"})`, "TensorRT-LLM {{instance}}"})).
		WithPanel(series("Requests running", "Requests in the running batch.", "short",
			prom{`sum by (instance, model_name) (vllm:num_requests_running)`, "vLLM {{instance}} {{model_name}}"},
			prom{`sum by (instance) (tgi_batch_current_size)`, "TGI {{instance}}"},
			prom{`sum by (instance) (nv_trt_llm_request_metrics{request_type="active"})`, "TensorRT-LLM {{instance}}"})).
		WithPanel(series("KV cache in use", "Share of the KV cache blocks in use: near 1, requests wait or are preempted.", "percentunit",
			prom{`max by (instance, model_name) (vllm:kv_cache_usage_perc)`, "vLLM {{instance}} {{model_name}}"},
			prom{`max by (instance) (nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"})`, "TensorRT-LLM {{instance}}"})).
		WithPanel(series("Preemptions", "Requests preempted (their KV cache evicted) per second, or paused by the in-flight batcher.", "ops",
			prom{`sum by (instance, model_name) (rate(vllm:num_preemptions_total[$__rate_interval]))`, "vLLM {{instance}} {{model_name}}"},
			prom{`sum by (instance) (nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="paused_requests"})`, "TensorRT-LLM {{instance}} paused"})).
		WithRow(row("Latency")).
		WithPanel(series("Time to first token, p99", "From the engine's histograms.", "s",
			prom{`histogram_quantile(0.99, sum by (le, instance, model_name) (rate(vllm:time_to_first_token_seconds_bucket[$__rate_interval])))`, "vLLM {{instance}} {{model_name}}"},
			prom{`histogram_quantile(0.99, sum by (le, instance) (rate(tgi_batch_inference_duration_bucket{method="prefill"}[$__rate_interval])))`, "TGI prefill {{instance}}"},
			prom{`histogram_quantile(0.99, sum by (le, instance, model) (rate(nv_inference_first_response_histogram_ms_bucket[$__rate_interval]))) / 1000`, "Triton {{instance}} {{model}}"})).
		WithPanel(series("Time per output token, p99", "Decode speed as the user sees it.", "s",
			prom{`histogram_quantile(0.99, sum by (le, instance, model_name) (rate(vllm:time_per_output_token_seconds_bucket[$__rate_interval])))`, "vLLM {{instance}} {{model_name}}"},
			prom{`histogram_quantile(0.99, sum by (le, instance) (rate(tgi_request_mean_time_per_token_duration_bucket[$__rate_interval])))`, "TGI {{instance}}"})).
		WithPanel(series("Queue time, p99", "Time a request waited before it was scheduled.", "s",
			prom{`histogram_quantile(0.99, sum by (le, instance, model_name) (rate(vllm:request_queue_time_seconds_bucket[$__rate_interval])))`, "vLLM {{instance}} {{model_name}}"},
			prom{`histogram_quantile(0.99, sum by (le, instance) (rate(tgi_request_queue_duration_bucket[$__rate_interval])))`, "TGI {{instance}}"})).
		WithRow(row("Batches and failures")).
		WithPanel(series("Batch size, p50", "Tokens per engine step (vLLM) and requests per batch (TGI).", "short",
			prom{`histogram_quantile(0.5, sum by (le, instance, model_name) (rate(vllm:iteration_tokens_total_bucket[$__rate_interval])))`, "vLLM tokens {{instance}} {{model_name}}"},
			prom{`histogram_quantile(0.5, sum by (le, instance) (rate(tgi_batch_next_size_bucket[$__rate_interval])))`, "TGI requests {{instance}}"})).
		WithPanel(series("Failed requests", "Requests the engine failed, per second.", "ops",
			prom{`sum by (instance) (rate(tgi_request_failure[$__rate_interval]))`, "TGI {{instance}}"},
			prom{`sum by (instance, model) (rate(nv_inference_request_failure[$__rate_interval]))`, "Triton {{instance}} {{model}}"}))
}
