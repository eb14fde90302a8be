// Package charttest renders the Loom chart with Helm's own Go SDK, as `helm
// template` and `helm install` do, and checks what comes out: every manifest
// decodes strictly into its Kubernetes API type, the objects fit together, the
// output matches the committed golden files, and the values schema accepts the
// examples and rejects the invalid values files. The rendered collector
// configs are run through `otelcol-loom validate` in validate_test.go (build
// tag e2e, like test/e2e).
package charttest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/releaseutil"
)

const (
	chartDir    = "../loom"
	examplesDir = "../examples"
	releaseName = "loom"
	namespace   = "observability"
	// kubeVersion is the cluster version rendered for (helm template
	// --kube-version): a library build of Helm assumes v1.20 otherwise.
	kubeVersion = "v1.31.0"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden from the chart")

// scenario is one way of installing the chart: the default values, or an
// example values file on top of them.
type scenario struct {
	name        string
	valuesFiles []string
}

// scenarios are the defaults and every file under examples/.
func scenarios(t *testing.T) []scenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d example values files under %s, expected several", len(files), examplesDir)
	}
	all := []scenario{{name: "default"}}
	for _, file := range files {
		all = append(all, scenario{name: strings.TrimSuffix(filepath.Base(file), ".yaml"), valuesFiles: []string{file}})
	}
	return all
}

// render runs the chart through Helm's install action in client-only dry-run
// mode (what `helm template` does) and returns the manifest.
func render(valuesFiles ...string) (string, error) {
	chart, err := loader.Load(chartDir)
	if err != nil {
		return "", err
	}
	vals, err := (&values.Options{ValueFiles: valuesFiles}).MergeValues(nil)
	if err != nil {
		return "", err
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.KubeVersion, err = chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return "", err
	}
	release, err := install.Run(chart, vals)
	if err != nil {
		return "", err
	}
	return release.Manifest, nil
}

// manifests splits a rendered manifest into its documents in a stable order.
func manifests(manifest string) []string {
	split := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(split))
	for key := range split {
		keys = append(keys, key)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	docs := make([]string, 0, len(keys))
	for _, key := range keys {
		if strings.TrimSpace(split[key]) != "" {
			docs = append(docs, split[key])
		}
	}
	return docs
}

func TestGoldenRenders(t *testing.T) {
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			manifest, err := render(sc.valuesFiles...)
			if err != nil {
				t.Fatalf("rendering the chart: %v", err)
			}
			golden := filepath.Join("testdata", "golden", sc.name+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(manifest), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v: run 'make helm-golden' to write it", err)
			}
			if manifest != string(want) {
				t.Errorf("the chart renders differently from %s; run 'make helm-golden' and review the diff:\n%s", golden, firstDifference(string(want), manifest))
			}
		})
	}
}

// firstDifference shows a few lines around the first line that differs.
func firstDifference(want, got string) string {
	wantLines, gotLines := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wantLines) || i < len(gotLines); i++ {
		if i < len(wantLines) && i < len(gotLines) && wantLines[i] == gotLines[i] {
			continue
		}
		var b bytes.Buffer
		for j := max(0, i-3); j <= i+3; j++ {
			w, g := "", ""
			if j < len(wantLines) {
				w = wantLines[j]
			}
			if j < len(gotLines) {
				g = gotLines[j]
			}
			marker := " "
			if w != g {
				marker = "!"
			}
			fmt.Fprintf(&b, "%s line %d\n    golden:   %s\n    rendered: %s\n", marker, j+1, w, g)
		}
		return b.String()
	}
	return "(no line differs)"
}

// TestChartConfigsAreTheDistributionConfigs keeps the chart's built-in
// collector configs the same as distribution/*.yaml, of which they are
// copies that `make generate` writes (the chart can read only its own files).
func TestChartConfigsAreTheDistributionConfigs(t *testing.T) {
	for _, tier := range []string{"agent", "gateway"} {
		source, err := os.ReadFile(filepath.Join("..", "..", tier+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		copied, err := os.ReadFile(filepath.Join(chartDir, "files", tier+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(source, copied) {
			t.Errorf("loom/files/%s.yaml differs from distribution/%s.yaml: run 'make generate' (or 'make helm-golden')", tier, tier)
		}
	}
}
