package grafana

// gpuOverview is the node agents' GPU view: NVML per GPU and process, XID
// errors, and the driver calls the eBPF tracer sees. The NVML metrics carry
// the GPU's resource attributes as labels (host_name, gpu_id, hw_name): the
// chart turns on the prometheus exporter's resource_to_telemetry_conversion.
func gpuOverview() *dashboardBuilder {
	return newDashboard("loom-gpu", "Loom / GPU overview",
		"NVIDIA GPUs on the nodes the Loom agents run on: NVML metrics, XID errors, and the driver's ioctls traced with eBPF, by process and pod.").
		WithRow(row("GPUs (NVML)")).
		WithPanel(series("GPU utilization", "Share of time the GPU's engine was busy (hw.gpu.utilization, task general).", "percentunit",
			prom{`max by (host_name, hw_name, gpu_id) (hw_gpu_utilization_ratio{hw_gpu_task="general"})`, "{{host_name}} {{hw_name}}"})).
		WithPanel(series("GPU memory", "Device memory in use and in total.", "bytes",
			prom{`sum by (host_name, hw_name) (hw_gpu_memory_usage_bytes)`, "{{host_name}} {{hw_name}} used"},
			prom{`sum by (host_name, hw_name) (hw_gpu_memory_limit_bytes)`, "{{host_name}} {{hw_name}} total"})).
		WithPanel(series("Power", "Power drawn by each board.", "watt",
			prom{`sum by (host_name, hw_name) (hw_power_watts)`, "{{host_name}} {{hw_name}}"})).
		WithPanel(series("Temperature", "GPU die temperature.", "celsius",
			prom{`max by (host_name, hw_name) (nvidia_gpu_temperature_celsius)`, "{{host_name}} {{hw_name}}"})).
		WithPanel(series("GPU memory by process", "Device memory of each compute process (host pid), the 20 largest.", "bytes",
			prom{`topk(20, sum by (host_name, hw_name, process_pid, process_command) (nvidia_gpu_process_memory_usage_bytes))`, "{{host_name}} {{hw_name}} {{process_command}} ({{process_pid}})"})).
		WithPanel(series("ECC errors", "Memory ECC errors per interval, corrected and uncorrected.", "short",
			prom{`sum by (host_name, hw_name, error_type) (increase(hw_errors_total[$__rate_interval]))`, "{{host_name}} {{hw_name}} {{error_type}}"})).
		WithRow(row("XID errors")).
		WithPanel(logSeries("XID errors by GPU and code", "gpu.xid log records in Loki, by GPU UUID and XID code (the nvidia.xid attribute in the log line).",
			`sum by (gpu_id, nvidia_xid) (count_over_time({service_name=~".+"} |= "nvidia.xid" | json | nvidia_xid != "" [$__auto]))`, "{{gpu_id}} XID {{nvidia_xid}}")).
		WithPanel(series("Tracer events read and dropped", "Failed and slow driver calls read from the eBPF ring buffer, and events lost because it was full (the calls are still counted below).", "short",
			prom{`sum by (tier, instance) (rate(otelcol_receiver_gpu_ioctl_events[$__rate_interval]))`, "{{instance}} read"},
			prom{`sum by (tier, instance) (rate(otelcol_receiver_gpu_ioctl_events_dropped[$__rate_interval]))`, "{{instance}} dropped"})).
		WithPanel(logLines("XID records", "The gpu.xid log records.",
			`{service_name=~".+"} |= "nvidia.xid" | json | nvidia_xid != ""`)).
		WithRow(row("Driver calls (eBPF ioctl tracer)")).
		WithPanel(series("Failed driver calls by escape and status", "Calls whose NV_STATUS was not NV_OK, and calls whose ioctl syscall itself failed, per second.", "ops",
			prom{`sum by (nvidia_ioctl_escape, nvidia_ioctl_status) (rate(nvidia_ioctl_calls_total{nvidia_ioctl_status!~"NV_OK|unknown"}[$__rate_interval]))`, "{{nvidia_ioctl_escape}} {{nvidia_ioctl_status}}"},
			prom{`sum by (nvidia_ioctl_escape, nvidia_ioctl_errno) (rate(nvidia_ioctl_calls_total{nvidia_ioctl_errno!="none"}[$__rate_interval]))`, "{{nvidia_ioctl_escape}} errno {{nvidia_ioctl_errno}}"})).
		WithPanel(series("Driver call latency by escape", "p50 and p99 time in the driver, from the tracer's log2 histogram.", "s",
			prom{`histogram_quantile(0.99, sum by (le, nvidia_ioctl_escape) (rate(nvidia_ioctl_duration_seconds_bucket[$__rate_interval])))`, "p99 {{nvidia_ioctl_escape}}"},
			prom{`histogram_quantile(0.5, sum by (le, nvidia_ioctl_escape) (rate(nvidia_ioctl_duration_seconds_bucket[$__rate_interval])))`, "p50 {{nvidia_ioctl_escape}}"})).
		WithPanel(series("Driver calls by process", "Calls per second of the 10 busiest processes (host pid).", "ops",
			prom{`topk(10, sum by (host_name, process_pid, process_command) (rate(nvidia_ioctl_calls_total[$__rate_interval])))`, "{{host_name}} {{process_command}} ({{process_pid}})"})).
		WithPanel(logSeries("Failed driver calls by pod", "gpu.ioctl.failed log records in Loki by the pod (k8s.pod.uid, read from the process's cgroup), escape and status: metrics name host pids only.",
			`sum by (k8s_pod_uid, nvidia_ioctl_escape, nvidia_ioctl_status) (count_over_time({service_name=~".+"} |= "nvidia.ioctl.status" | json | nvidia_ioctl_status != "NV_OK" [$__auto]))`, "{{k8s_pod_uid}} {{nvidia_ioctl_escape}} {{nvidia_ioctl_status}}"))
}
