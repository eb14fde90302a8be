package grafana

// goldenFieldQuality is the goldenfield processor's view (it runs on the agents).
func goldenFieldQuality() *dashboardBuilder {
	return newDashboard("loom-golden-fields", "Loom / Golden-field quality",
		"How well the services' records carry the golden fields (req_id, stage, input_hash, model_ver, resource_usage.*): valid and invalid records, failures by field and service, noise, redactions, schema drift.").
		WithPanel(series("Records valid and invalid", "Records per second that passed and failed golden-field validation.", "ops",
			prom{`sum by (tier) (rate(otelcol_processor_goldenfield_records_valid[$__rate_interval]))`, "valid"},
			prom{`sum by (tier) (rate(otelcol_processor_goldenfield_records_invalid[$__rate_interval]))`, "invalid"})).
		WithPanel(series("Validation failures by field", "Failures per second by golden field and reason (missing, invalid, rule); a record can fail several.", "ops",
			prom{`sum by (field, reason) (rate(otelcol_processor_goldenfield_validation_failures[$__rate_interval]))`, "{{field}} {{reason}}"})).
		WithPanel(series("Noise ratio by service", "Invalid records divided by valid ones per service since start: above 1, a service sends more noise than usable records.", "short",
			prom{`max by (service) (otelcol_processor_goldenfield_log_noise_ratio)`, "{{service}}"})).
		WithPanel(logSeries("Invalid records by service", "Records Loki holds with golden_valid=false (structured metadata), by service.",
			`sum by (service_name) (count_over_time({service_name=~".+"} | golden_valid="false" [$__auto]))`, "{{service_name}}")).
		WithPanel(series("Schema drift events", "Schema drift detected per service: a model version whose records lost or gained fields.", "short",
			prom{`sum by (service) (increase(otelcol_processor_goldenfield_drift_events[$__rate_interval]))`, "{{service}}"})).
		WithPanel(series("Redactions", "Values hashed and removed before export, by what was redacted (raw inputs, attributes, bodies).", "ops",
			prom{`sum by (target) (rate(otelcol_processor_goldenfield_redactions[$__rate_interval]))`, "{{target}}"})).
		WithPanel(traces("Spans that failed validation", "Spans whose golden fields failed validation, to open in Tempo.",
			`{ span.golden.valid = false }`))
}
