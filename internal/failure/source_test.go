package failure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/workload/foundry"
	"github.com/loom-otel/loom/internal/workload/fuzz"
)

// TestNoWorkloadNamesInTheModel fails when the failure model's source names a
// field, stage or service of a workload Loom's tests generate: a detector
// must work on the class of evidence, not on one workload's names.
func TestNoWorkloadNamesInTheModel(t *testing.T) {
	// loomgen's names for its incidents' evidence, and the foundry family's vocabulary.
	names := append([]string{"output_length", "filter_reason", "cache/miss", "model/forward", "empty_output"}, foundry.Vocabulary()...)
	names = append(names, fuzz.Vocabulary()...)
	dirs := []string{".", "sketch", "../../processor/reqsamplingprocessor/internal/policy"}
	checked := 0
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			require.NoError(t, err)
			checked++
			for _, name := range names {
				require.NotContains(t, string(src), `"`+name+`"`, "%s names a workload's %q", file, name)
			}
		}
	}
	require.Greater(t, checked, 10)
}
