package grafana

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Documentation is one of Loom's documentation.md files (mdatagen output).
type Documentation struct {
	File               string
	Metrics            []DocumentedMetric
	ResourceAttributes []DocumentedAttribute
}

// DocumentedMetric is a metric a documentation.md lists, with the names
// Prometheus gives it.
type DocumentedMetric struct {
	// Type is Sum, Gauge or Histogram; ValueType Int or Double.
	Doc, Name, Unit, Type, ValueType string
	Monotonic                        bool
	// Internal is true for the collector's own telemetry, which the
	// service's Prometheus reader exports under the documented name;
	// other metrics go through the prometheus exporter, which adds the
	// unit and _total.
	Internal   bool
	Attributes []DocumentedAttribute
}

// DocumentedAttribute is an attribute of a metric or resource: its type
// (Str, Int, Double, Bool) and, for an enumeration, its values.
type DocumentedAttribute struct {
	Name, Type string
	Values     []string
}

// PrometheusNames are the series names Prometheus stores for the metric.
func (m DocumentedMetric) PrometheusNames() []string {
	name := strings.NewReplacer(".", "_", "-", "_").Replace(m.Name)
	if !m.Internal {
		if unit := prometheusUnit(m.Unit, m.Type); unit != "" && !strings.HasSuffix(name, "_"+unit) {
			name += "_" + unit
		}
		if m.Type == "Sum" && m.Monotonic {
			name += "_total"
		}
	}
	if m.Type == "Histogram" {
		return []string{name + "_bucket", name + "_sum", name + "_count"}
	}
	return []string{name}
}

// prometheusUnit is the suffix the prometheus exporter writes for a UCUM
// unit (annotations such as {call} have none; a ratio of 1 is _ratio on gauges).
func prometheusUnit(unit, kind string) string {
	switch unit {
	case "By":
		return "bytes"
	case "s":
		return "seconds"
	case "ms":
		return "milliseconds"
	case "W":
		return "watts"
	case "J":
		return "joules"
	case "Hz":
		return "hertz"
	case "Cel":
		return "celsius"
	case "By/s":
		return "bytes_per_second"
	case "1":
		if kind == "Gauge" {
			return "ratio"
		}
	}
	return ""
}

// ReadDocumentation reads every documentation.md under root (the
// repository), skipping ocb's output, test data and hidden directories.
func ReadDocumentation(root string) ([]Documentation, error) {
	var out []Documentation
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "otelcol-loom" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "documentation.md" {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		doc, err := parseDocumentation(rel, raw)
		out = append(out, doc)
		return err
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("no documentation.md under %s", root)
	}
	return out, err
}

// parseDocumentation reads mdatagen's layout: "### <metric>", a description
// and a table whose header names its columns (Unit, Metric Type, …,
// Monotonic), then "#### Attributes" and their table; "## Resource
// Attributes" has a table of its own, and "## Internal Telemetry" starts the
// collector's own metrics.
func parseDocumentation(file string, raw []byte) (Documentation, error) {
	doc := Documentation{File: file}
	internal := false
	var metric *DocumentedMetric
	var header []string
	// table is what the rows of the table being read describe.
	table := ""
	scanner := bufio.NewScanner(bytes.NewReader(raw))
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		switch {
		case strings.HasPrefix(line, "## "):
			internal = strings.Contains(line, "Internal Telemetry")
			metric, header, table = nil, nil, ""
			if strings.Contains(line, "Resource Attributes") {
				table = "resource"
			}
		case strings.HasPrefix(line, "### "):
			doc.Metrics = append(doc.Metrics, DocumentedMetric{Doc: file, Name: strings.TrimSpace(line[4:]), Internal: internal})
			metric, header, table = &doc.Metrics[len(doc.Metrics)-1], nil, "metric"
		case strings.HasPrefix(line, "#### Attributes") && metric != nil:
			header, table = nil, "attributes"
		case strings.HasPrefix(line, "|") && table != "":
			cells := tableCells(line)
			if header == nil {
				header = cells
				continue
			}
			if strings.HasPrefix(cells[0], "-") {
				continue
			}
			row := map[string]string{}
			for i, column := range header {
				if i < len(cells) {
					row[column] = cells[i]
				}
			}
			switch table {
			case "metric":
				metric.Unit, metric.Type, metric.ValueType, metric.Monotonic = row["Unit"], row["Metric Type"], row["Value Type"], row["Monotonic"] == "true"
				if metric.Type == "" {
					return doc, fmt.Errorf("%s: metric %s: no Metric Type in its table", file, metric.Name)
				}
			case "attributes":
				metric.Attributes = append(metric.Attributes, attribute(row))
			case "resource":
				doc.ResourceAttributes = append(doc.ResourceAttributes, attribute(row))
			}
		}
	}
	return doc, scanner.Err()
}

// attribute reads a row's Name and Values ("Any Str", or "Str: “a“, “b“").
func attribute(row map[string]string) DocumentedAttribute {
	a := DocumentedAttribute{Name: row["Name"]}
	values := row["Values"]
	if kind, ok := strings.CutPrefix(values, "Any "); ok {
		a.Type = kind
		return a
	}
	kind, list, _ := strings.Cut(values, ":")
	a.Type = kind
	for _, v := range strings.Split(list, ",") {
		if v = strings.Trim(strings.TrimSpace(v), "`"); v != "" {
			a.Values = append(a.Values, v)
		}
	}
	return a
}

func tableCells(line string) []string {
	parts := strings.Split(strings.Trim(line, "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// CollectorMetrics are the core and contrib collector metrics the dashboards
// use, which no Loom documentation.md lists: the service's own process
// metrics and the receiver, scraper, processor and exporter helpers'.
var CollectorMetrics = []string{
	"otelcol_process_cpu_seconds", "otelcol_process_memory_rss", "otelcol_process_runtime_heap_alloc_bytes",
	"otelcol_receiver_accepted_spans", "otelcol_receiver_accepted_log_records",
	"otelcol_receiver_refused_spans", "otelcol_receiver_refused_log_records",
	"otelcol_receiver_failed_spans", "otelcol_receiver_failed_log_records",
	"otelcol_scraper_scraped_metric_points",
	"otelcol_processor_incoming_items", "otelcol_processor_outgoing_items",
	"otelcol_exporter_sent_spans", "otelcol_exporter_sent_log_records", "otelcol_exporter_sent_metric_points",
	"otelcol_exporter_send_failed_spans", "otelcol_exporter_send_failed_log_records",
	"otelcol_exporter_queue_size", "otelcol_exporter_queue_capacity",
}

// UndocumentedLoomMetrics are Loom's own metrics that no documentation.md can
// list, with where they are documented instead.
var UndocumentedLoomMetrics = map[string]string{
	// mdatagen has no histograms: the gpu receiver builds this one by hand.
	"nvidia_ioctl_duration_seconds_bucket": "receiver/gpureceiver/README.md (nvidia.ioctl.duration)",
}
