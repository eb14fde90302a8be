//go:build !nvml

package nvmlsource

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOpenWithoutNVML(t *testing.T) {
	s, err := Open(Options{MIG: true, XIDEvents: true})
	require.True(t, errors.Is(err, ErrNotBuilt))
	assert.Nil(t, s)
	assert.Contains(t, err.Error(), "-tags nvml")
}
