package charttest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestInvalidValuesFail installs every file under testdata/invalid and
// expects the install to fail with the message its "# want:" line gives:
// the schema's for typos, types and ranges, the chart's for rules between keys.
func TestInvalidValuesFail(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "invalid", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid values files (%v)", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			want := wantLine(t, file)
			_, err := render(file)
			if err == nil {
				t.Fatalf("the chart installs with %s", file)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not say %q:\n%v", want, err)
			}
		})
	}
}

func wantLine(t *testing.T, file string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	scanner := bufio.NewScanner(bytes.NewReader(raw))
	for scanner.Scan() {
		if want, ok := strings.CutPrefix(scanner.Text(), "# want: "); ok {
			return want
		}
	}
	t.Fatalf("%s has no '# want: <part of the error>' line", file)
	return ""
}

// TestLintPasses runs `helm lint`'s checks (chart metadata, values against the
// schema, templates, the YAML they produce) for the defaults and each example,
// and fails on anything above an INFO.
func TestLintPasses(t *testing.T) {
	kube, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			vals, err := (&values.Options{ValueFiles: sc.valuesFiles}).MergeValues(nil)
			if err != nil {
				t.Fatal(err)
			}
			linter := lint.AllWithKubeVersion(chartDir, vals, namespace, kube)
			for _, msg := range linter.Messages {
				if msg.Severity > support.InfoSev {
					t.Errorf("helm lint: %s", msg)
				}
			}
		})
	}
}

// TestSchemaAcceptsTheDefaults keeps values.yaml itself inside the schema
// (the install merges it under every values file, so rendering alone would
// not say which side broke it).
func TestSchemaAcceptsTheDefaults(t *testing.T) {
	defaults, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := chartutil.ValidateAgainstSingleSchema(defaults, schema); err != nil {
		t.Fatalf("values.yaml does not satisfy values.schema.json:\n%v", err)
	}
}
