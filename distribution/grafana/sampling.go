package grafana

// sampling is the reqsampling processor's view (it runs on the gateways).
func sampling() *dashboardBuilder {
	return newDashboard("loom-sampling", "Loom / Sampling",
		"Request-level tail sampling on the gateways: decisions by policy, the share kept, the volume guard that decides early, late records and the hand-over between gateways, and the inputs learned to be failing.").
		WithPanel(series("Decisions by policy", "Requests decided per second, by the policy that set their probability (base_rate when none matched) and the outcome.", "ops",
			prom{`sum by (policy, outcome) (rate(otelcol_processor_reqsampling_decisions[$__rate_interval]))`, "{{policy}} {{outcome}}"})).
		WithPanel(series("Kept share", "Share of the requests, and of the spans and log records, kept.", "percentunit",
			prom{`sum(rate(otelcol_processor_reqsampling_decisions{outcome="kept"}[$__rate_interval])) / sum(rate(otelcol_processor_reqsampling_decisions[$__rate_interval]))`, "requests"},
			prom{`sum by (signal) (rate(otelcol_processor_reqsampling_records{outcome="kept"}[$__rate_interval])) / sum by (signal) (rate(otelcol_processor_reqsampling_records[$__rate_interval]))`, "{{signal}}"})).
		WithRow(row("Volume guard")).
		WithPanel(series("Requests waiting for a decision", "Requests buffered within decision_wait, and their estimated size: the guard decides the oldest early at max_requests or max_bytes.", "short",
			prom{`sum by (instance) (otelcol_processor_reqsampling_pending_requests)`, "{{instance}} requests"})).
		WithPanel(series("Bytes waiting for a decision", "Estimated size of the buffered records.", "bytes",
			prom{`sum by (instance) (otelcol_processor_reqsampling_pending_bytes)`, "{{instance}}"})).
		WithPanel(series("Early decisions by reason", "Requests decided before decision_wait, to stay within max_requests or max_bytes, or at shutdown.", "ops",
			prom{`sum by (reason) (rate(otelcol_processor_reqsampling_early_decisions[$__rate_interval]))`, "{{reason}}"})).
		WithRow(row("Late records and gateways")).
		WithPanel(series("Late records and late failures", "Records that arrived after their request was decided, by the decision they shared; and requests dropped whose later records showed a failure (kept from then on). When late failures grow, decision_wait is shorter than the delay of the clients' batches.", "ops",
			prom{`sum by (outcome) (rate(otelcol_processor_reqsampling_late_records[$__rate_interval]))`, "late records {{outcome}}"},
			prom{`sum(rate(otelcol_processor_reqsampling_late_failures[$__rate_interval]))`, "late failures (requests)"})).
		WithPanel(series("Hand-over between gateways", "Records forwarded to the gateway that owns their request, by why and whether it took them (failed: decided here, the request may be split); and records other gateways handed to this one.", "ops",
			prom{`sum by (cause, result) (rate(otelcol_processor_reqsampling_handed_over_records[$__rate_interval]))`, "handed over {{cause}} {{result}}"},
			prom{`sum by (instance) (rate(otelcol_processor_reqsampling_taken_over_records[$__rate_interval]))`, "taken over by {{instance}}"})).
		WithRow(row("Hot inputs")).
		WithPanel(series("Hot inputs", "input_hash values and prefix buckets the learner holds hot (their requests are kept).", "short",
			prom{`sum by (kind) (otelcol_processor_reqsampling_hot_inputs)`, "{{kind}}"})).
		WithPanel(series("Failure share by input bucket", "Failed ÷ decided requests per input_hash prefix bucket, the 10 highest.", "percentunit",
			prom{`topk(10, sum by (bucket) (rate(otelcol_processor_reqsampling_bucket_failures[$__rate_interval])) / sum by (bucket) (rate(otelcol_processor_reqsampling_bucket_requests[$__rate_interval])))`, "{{bucket}}"})).
		WithPanel(traces("Kept failing requests", "Spans kept by a policy other than the base rate, to open in Tempo.",
			`{ span.sampling.policy != nil && span.sampling.policy != "base_rate" }`))
}
