//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// shippedConfigs are the collector configs the repository ships: every YAML
// file under distribution/ except ocb's own output, the Helm chart (its
// rendered configs are validated by distribution/helm/charttest) and the
// Grafana provisioning files.
func shippedConfigs(t *testing.T) []string {
	t.Helper()
	var configs []string
	err := filepath.WalkDir(filepath.Join(repoRoot, "distribution"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "otelcol-loom" || d.Name() == "helm" || d.Name() == "grafana") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			configs = append(configs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(configs) == 0 {
		t.Fatal("no config found under distribution/")
	}
	// The GPU machine check's config ships too (make gpu-check).
	return append(configs, filepath.Join(repoRoot, "test", "gpu", "collector.yaml"))
}

func TestValidateAcceptsEveryShippedConfig(t *testing.T) {
	for _, config := range shippedConfigs(t) {
		rel, _ := filepath.Rel(repoRoot, config)
		t.Run(rel, func(t *testing.T) {
			out, err := runCollector(t, "validate", "--config", config)
			if err != nil {
				t.Fatalf("otelcol-loom validate --config %s: %v\n%s", rel, err, out)
			}
			if strings.Contains(out, "deprecated") {
				t.Errorf("%s uses deprecated names:\n%s", rel, out)
			}
		})
	}
}

func TestValidateRejectsABrokenConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.yaml")
	broken := "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:4317\nexporters:\n  debug:\nservice:\n  pipelines:\n    logs:\n      receivers: [otlp]\n      exporters: [no_such_exporter]\n"
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCollector(t, "validate", "--config", path)
	if err == nil {
		t.Fatalf("validate accepted a pipeline naming an undefined exporter:\n%s", out)
	}
	if !strings.Contains(out, "no_such_exporter") {
		t.Fatalf("the error does not name the bad key:\n%s", out)
	}
}

// builderModules are the gomod entries of builder-config.yaml by component kind.
func builderModules(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "builder-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]any
	if err := yaml.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	modules := map[string][]string{}
	for _, kind := range []string{"receivers", "processors", "exporters", "extensions", "connectors"} {
		entries, _ := manifest[kind].([]any)
		for _, entry := range entries {
			gomod, _ := entry.(map[string]any)["gomod"].(string)
			modules[kind] = append(modules[kind], gomod)
		}
		sort.Strings(modules[kind])
	}
	return modules
}

func TestComponentsListsEveryBuilderComponent(t *testing.T) {
	out, err := runCollector(t, "components")
	if err != nil {
		t.Fatalf("otelcol-loom components: %v\n%s", err, out)
	}
	var listed map[string]any
	if err := yaml.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("components output is not YAML: %v\n%s", err, out)
	}
	for kind, want := range builderModules(t) {
		entries, _ := listed[kind].([]any)
		var got []string
		for _, entry := range entries {
			module, _ := entry.(map[string]any)["module"].(string)
			got = append(got, module)
		}
		sort.Strings(got)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: components lists\n  %s\nbuilder-config.yaml has\n  %s", kind, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}
