package main

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/loom-otel/loom/internal/golden"
)

// A pipeline is one collector configuration under test.
type pipeline struct {
	name  string // loom, stock, floor
	about string
	// config returns the collector's configuration; listeners are moved to
	// free ports afterwards.
	config func(repo string) (map[string]any, error)
}

var pipelines = []pipeline{
	{"loom", "Loom's default pipeline (distribution/config.yaml)", loomConfig},
	{"stock", "stock components doing the closest job: transform (OTTL body parsing, aliases) -> tail_sampling -> batch -> debug", stockConfig},
	{"floor", "the floor: otlp -> batch -> debug", floorConfig},
}

func pipelineNamed(name string) (pipeline, bool) {
	for _, p := range pipelines {
		if p.name == name {
			return p, true
		}
	}
	return pipeline{}, false
}

// loomConfig is the shipped default config as it is; the collector runs in a
// temporary directory, where its embedded event graph (./data) lands.
func loomConfig(repo string) (map[string]any, error) {
	raw, err := os.ReadFile(filepath.Join(repo, "distribution", "config.yaml"))
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("distribution/config.yaml: %w", err)
	}
	return cfg, nil
}

// common is what every pipeline has besides its own components: the OTLP
// receiver, health_check for readiness, pprof, and the collector's own
// metrics (refusals, process memory) on a pull endpoint.
func common(processors map[string]any, logs, traces []any) map[string]any {
	return map[string]any{
		"extensions": map[string]any{
			"health_check": map[string]any{"endpoint": "127.0.0.1:13133"},
			"pprof":        map[string]any{"endpoint": "127.0.0.1:1777"},
		},
		"receivers": map[string]any{"otlp": map[string]any{"protocols": map[string]any{
			"grpc": map[string]any{"endpoint": "127.0.0.1:4317"},
			"http": map[string]any{"endpoint": "127.0.0.1:4318"},
		}}},
		"processors": processors,
		"exporters":  map[string]any{"debug": map[string]any{"verbosity": "basic"}},
		"service": map[string]any{
			"extensions": []any{"health_check", "pprof"},
			"telemetry": map[string]any{"metrics": map[string]any{"readers": []any{map[string]any{
				"pull": map[string]any{"exporter": map[string]any{"prometheus": map[string]any{"host": "127.0.0.1", "port": 8888}}},
			}}}},
			"pipelines": map[string]any{
				"logs":   map[string]any{"receivers": []any{"otlp"}, "processors": logs, "exporters": []any{"debug"}},
				"traces": map[string]any{"receivers": []any{"otlp"}, "processors": traces, "exporters": []any{"debug"}},
			},
		},
	}
}

// batch is the default config's batch processor.
var batch = map[string]any{"send_batch_size": 8192, "timeout": "200ms"}

func floorConfig(string) (map[string]any, error) {
	return common(map[string]any{"batch": batch}, []any{"batch"}, []any{"batch"}), nil
}

// stockConfig does with contrib's components what goldenfield and
// reqsampling do in the default pipeline, as closely as they allow: parse
// JSON, logfmt and "[req-…]" bodies into attributes, copy every alias of
// golden.DefaultAliases to its canonical name, hash and drop raw prompts,
// and sample traces by request outcome (errors, empty outputs, latency,
// cache misses, 1% of the rest) after the same 10 s wait. tail_sampling
// has no logs: every log record is exported.
func stockConfig(string) (map[string]any, error) {
	logStatements := []any{
		`merge_maps(attributes, ParseJSON(body), "insert") where IsString(body) and IsMatch(body, "^\\{")`,
		`merge_maps(attributes, ParseKeyValue(body), "insert") where IsString(body) and IsMatch(body, "^level=")`,
		`merge_maps(attributes, ExtractPatterns(body, "^\\[(?P<req_id>req-[^\\]]+)\\]"), "insert") where IsString(body) and IsMatch(body, "^\\[req-")`,
	}
	logStatements = append(logStatements, goldenStatements()...)
	return common(map[string]any{
		"transform": map[string]any{
			"error_mode":     "ignore",
			"log_statements": []any{map[string]any{"context": "log", "statements": logStatements}},
			"trace_statements": []any{map[string]any{
				"context": "span", "statements": goldenStatements(),
			}},
		},
		"tail_sampling": map[string]any{
			"decision_wait": "10s",
			"policies": []any{
				map[string]any{"name": "errors", "type": "status_code", "status_code": map[string]any{"status_codes": []any{"ERROR"}}},
				map[string]any{"name": "empty_output", "type": "ottl_condition", "ottl_condition": map[string]any{
					"error_mode": "ignore",
					"span": []any{
						`Int(attributes["output_length"]) == 0`,
						`attributes["filter_reason"] != nil and attributes["filter_reason"] != "none"`,
					},
				}},
				map[string]any{"name": "latency", "type": "latency", "latency": map[string]any{"threshold_ms": 2000}},
				map[string]any{"name": "cache_miss", "type": "string_attribute", "string_attribute": map[string]any{
					"key": "stage", "values": []any{"cache/miss.*"}, "enabled_regex_matching": true,
				}},
				map[string]any{"name": "base_rate", "type": "probabilistic", "probabilistic": map[string]any{"sampling_percentage": 1}},
			},
		},
		"batch": batch,
	}, []any{"transform", "batch"}, []any{"transform", "tail_sampling", "batch"}), nil
}

// goldenStatements copy each alias to its canonical field (numbers for the
// numeric ones) unless that is set, delete the alias, and replace a raw
// prompt by its hash.
func goldenStatements() []any {
	aliases := golden.DefaultAliases()
	var out []any
	for _, alias := range slices.Sorted(maps.Keys(aliases)) {
		canonical := aliases[alias]
		value := fmt.Sprintf(`attributes[%q]`, alias)
		if golden.IsResourceUsage(canonical) || canonical == golden.InputTokens || canonical == golden.OutputTokens {
			value = fmt.Sprintf(`Double(%s)`, value)
		}
		out = append(out, fmt.Sprintf(`set(attributes[%q], %s) where attributes[%q] != nil and attributes[%q] == nil`, canonical, value, alias, canonical))
		if !golden.KeepsSource(alias) {
			out = append(out, fmt.Sprintf(`delete_key(attributes, %q)`, alias))
		}
	}
	return append(out,
		fmt.Sprintf(`set(attributes[%q], Substring(SHA256(attributes["prompt"]), 0, %d)) where attributes["prompt"] != nil and attributes[%q] == nil`,
			golden.InputHash, golden.InputHashLen, golden.InputHash),
		`delete_key(attributes, "prompt")`)
}

var loopbackListener = regexp.MustCompile(`^(127\.0\.0\.1|localhost):\d+$`)

// listeners maps each listener moved to a free port to its new address,
// by the config path of its key ("receivers.otlp.protocols.grpc.endpoint",
// "service.telemetry.metrics.readers[0].pull.exporter.prometheus.port").
type listeners map[string]string

// moveListeners gives every loopback listener in cfg a free port: an
// `endpoint: 127.0.0.1:N` anywhere (the default config's exporters listen
// too: prometheus), and a host/port pair such as the telemetry reader's.
func moveListeners(cfg map[string]any) (listeners, error) {
	moved := listeners{}
	var walk func(node any, path string) error
	walk = func(node any, path string) error {
		switch n := node.(type) {
		case map[string]any:
			if host, ok := n["host"].(string); ok && (host == "127.0.0.1" || host == "localhost") {
				if _, ok := n["port"].(int); ok {
					port, err := freePort()
					if err != nil {
						return err
					}
					n["port"] = port
					moved[path+".port"] = net.JoinHostPort(host, strconv.Itoa(port))
				}
			}
			for _, key := range slices.Sorted(maps.Keys(n)) {
				child := key
				if path != "" {
					child = path + "." + key
				}
				if s, ok := n[key].(string); ok && key == "endpoint" && loopbackListener.MatchString(s) {
					host, _, _ := net.SplitHostPort(s)
					port, err := freePort()
					if err != nil {
						return err
					}
					n[key] = net.JoinHostPort(host, strconv.Itoa(port))
					moved[child] = n[key].(string)
					continue
				}
				if err := walk(n[key], child); err != nil {
					return err
				}
			}
		case []any:
			for i, v := range n {
				if err := walk(v, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return moved, walk(cfg, "")
}

// portsHandedOut keeps freePort from handing out a port twice in a run:
// the kernel may offer one just closed again.
var portsHandedOut = map[int]bool{}

func freePort() (int, error) {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !portsHandedOut[port] {
			portsHandedOut[port] = true
			return port, nil
		}
	}
}

// endpoint is the moved listener whose config path ends in suffix.
func (l listeners) endpoint(suffix string) (string, error) {
	for _, path := range slices.Sorted(maps.Keys(l)) {
		if len(path) >= len(suffix) && path[len(path)-len(suffix):] == suffix {
			return l[path], nil
		}
	}
	return "", fmt.Errorf("the config has no loopback listener at *%s: the benchmark needs it", suffix)
}
