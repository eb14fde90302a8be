//go:build e2e

package charttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestRenderedConfigsValidate runs every collector config the chart renders,
// for the defaults and each example, through `otelcol-loom validate` with the
// environment its container gets: the binary checks every component's
// settings, so a chart value that produces a config the collector refuses fails here.
func TestRenderedConfigsValidate(t *testing.T) {
	bin := collectorBin(t)
	for _, sc := range scenarios(t) {
		objs := install(t, sc.valuesFiles...)
		for _, w := range objs.workloads() {
			t.Run(sc.name+"/"+w.name, func(t *testing.T) {
				config, err := objs.configOf(w)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, "validate", "--config="+path)
				cmd.Env = append(os.Environ(), containerEnv(w.pod.Spec.Containers[0])...)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("otelcol-loom validate: %v\n%s\nthe config:\n%s", err, out, config)
				}
			})
		}
	}
}

// collectorBin is $LOOM_BIN, or bin/otelcol-loom built by `make build`.
func collectorBin(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("LOOM_BIN"); bin != "" {
		return bin
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("make", "--no-print-directory", "build")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	return filepath.Join(root, "bin", "otelcol-loom")
}

var dependentVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// containerEnv is the environment the kubelet would give the container:
// literal values with $(VAR) references expanded, and stand-ins for what only
// the cluster knows (the downward API, Secrets).
func containerEnv(c corev1.Container) []string {
	values := map[string]string{}
	var env []string
	for _, e := range c.Env {
		value := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			value = "downward-" + e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom != nil:
			value = "from-secret"
		default:
			value = dependentVar.ReplaceAllStringFunc(value, func(ref string) string {
				if v, ok := values[ref[2:len(ref)-1]]; ok {
					return v
				}
				return ref
			})
		}
		values[e.Name] = value
		env = append(env, fmt.Sprintf("%s=%s", e.Name, value))
	}
	return env
}
