package grafana

// pipelineHealth is both tiers' collector telemetry. The tier label is the
// scrape's (the chart README's Prometheus config sets it from the pod's
// app.kubernetes.io/component label).
func pipelineHealth() *dashboardBuilder {
	return newDashboard("loom-pipeline", "Loom / Pipeline health",
		"The agents' and gateways' pipelines: what each receiver accepted and refused, what each exporter sent and failed to send, queues, stitching, the event graph, memory and CPU.").
		WithRow(row("In and out")).
		WithPanel(series("Accepted by receiver", "Spans and log records per second each receiver accepted.", "ops",
			prom{`sum by (tier, receiver) (rate(otelcol_receiver_accepted_spans[$__rate_interval]))`, "{{tier}} {{receiver}} spans"},
			prom{`sum by (tier, receiver) (rate(otelcol_receiver_accepted_log_records[$__rate_interval]))`, "{{tier}} {{receiver}} logs"},
			prom{`sum by (tier, receiver, scraper) (rate(otelcol_scraper_scraped_metric_points[$__rate_interval]))`, "{{tier}} {{receiver}} {{scraper}} metric points"})).
		WithPanel(series("Refused and failed by receiver", "Records a receiver refused (memory_limiter pushing back) or failed to pass on.", "ops",
			prom{`sum by (tier, receiver) (rate(otelcol_receiver_refused_spans[$__rate_interval]) + rate(otelcol_receiver_refused_log_records[$__rate_interval]))`, "{{tier}} {{receiver}} refused"},
			prom{`sum by (tier, receiver) (rate(otelcol_receiver_failed_spans[$__rate_interval]) + rate(otelcol_receiver_failed_log_records[$__rate_interval]))`, "{{tier}} {{receiver}} failed"})).
		WithPanel(series("Sent by exporter", "Spans, log records and metric points per second each exporter sent.", "ops",
			prom{`sum by (tier, exporter) (rate(otelcol_exporter_sent_spans[$__rate_interval]))`, "{{tier}} {{exporter}} spans"},
			prom{`sum by (tier, exporter) (rate(otelcol_exporter_sent_log_records[$__rate_interval]))`, "{{tier}} {{exporter}} logs"},
			prom{`sum by (tier, exporter) (rate(otelcol_exporter_sent_metric_points[$__rate_interval]))`, "{{tier}} {{exporter}} metric points"})).
		WithPanel(series("Failed sends by exporter", "Records an exporter gave up on (permanent errors, retries exhausted), and Loki's rejections by Loki's reason.", "ops",
			prom{`sum by (tier, exporter) (rate(otelcol_exporter_send_failed_log_records[$__rate_interval]))`, "{{tier}} {{exporter}} logs"},
			prom{`sum by (tier, exporter) (rate(otelcol_exporter_send_failed_spans[$__rate_interval]))`, "{{tier}} {{exporter}} spans"},
			prom{`sum by (reason) (rate(otelcol_exporter_loki_requests_rejected[$__rate_interval]))`, "loki rejected: {{reason}}"})).
		WithPanel(series("Queue fill by exporter", "Sending queue size as a share of its capacity.", "percentunit",
			prom{`max by (tier, exporter, data_type) (otelcol_exporter_queue_size / otelcol_exporter_queue_capacity)`, "{{tier}} {{exporter}} {{data_type}}"})).
		WithPanel(series("Processors: items in and out", "Items per second into and out of each processor (a sampler or a filter lets fewer out).", "ops",
			prom{`sum by (tier, processor) (rate(otelcol_processor_incoming_items[$__rate_interval]))`, "{{tier}} {{processor}} in"},
			prom{`sum by (tier, processor) (rate(otelcol_processor_outgoing_items[$__rate_interval]))`, "{{tier}} {{processor}} out"})).
		WithRow(row("Stitching and the event graph")).
		WithPanel(series("Records given an id", "Records reqidstitch gave the id they lacked: trace context, req_id, or the req_id of a GPU process's covering span.", "ops",
			prom{`sum by (tier, direction) (rate(otelcol_processor_reqidstitch_records_filled[$__rate_interval]))`, "{{tier}} {{direction}}"})).
		WithPanel(series("Held records released", "Records the stitching hold let go, by outcome (bound, expired, overflow, shutdown), and requests in the binding index.", "short",
			prom{`sum by (tier, outcome) (rate(otelcol_processor_reqidstitch_hold_released[$__rate_interval]))`, "{{tier}} {{outcome}}"},
			prom{`sum by (tier) (otelcol_processor_reqidstitch_tracked_requests)`, "{{tier}} tracked requests"})).
		WithPanel(series("Stitching state dropped", "Held records dropped because the next consumer refused them for good, or too many waited for a retry; and entries evicted from reqidstitch's bounded tables (requests, GPU processes and spans, rule keys) at capacity or by TTL. Capacity evictions mean a bound is too small for the traffic.", "ops",
			prom{`sum by (tier, cause) (rate(otelcol_processor_reqidstitch_hold_dropped[$__rate_interval]))`, "{{tier}} held records dropped: {{cause}}"},
			prom{`sum by (tier, table, reason) (rate(otelcol_processor_reqidstitch_evicted[$__rate_interval]))`, "{{tier}} evicted {{table}} ({{reason}})"})).
		WithPanel(series("Event graph writes", "Events and edge references written to the graph per second.", "ops",
			prom{`sum by (tier) (rate(otelcol_exporter_eventgraph_events_written[$__rate_interval]))`, "{{tier}} events"},
			prom{`sum by (tier) (rate(otelcol_exporter_eventgraph_edges_written[$__rate_interval]))`, "{{tier}} edges"})).
		WithRow(row("Resources")).
		WithPanel(series("Memory", "Resident memory and Go heap of each collector.", "bytes",
			prom{`max by (tier, instance) (otelcol_process_memory_rss)`, "{{tier}} {{instance}} RSS"},
			prom{`max by (tier, instance) (otelcol_process_runtime_heap_alloc_bytes)`, "{{tier}} {{instance}} heap"})).
		WithPanel(series("CPU", "CPU seconds per second of each collector.", "short",
			prom{`sum by (tier, instance) (rate(otelcol_process_cpu_seconds[$__rate_interval]))`, "{{tier}} {{instance}}"}))
}
