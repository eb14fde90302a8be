package sharedcomponent

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
)

func TestRegistrySharesUntilTheLastRelease(t *testing.T) {
	var r Registry[*int]
	id := component.MustNewID("gpu")
	created := 0
	create := func() (*int, error) {
		created++
		v := created
		return &v, nil
	}
	a, err := r.Acquire(id, create)
	require.NoError(t, err)
	b, err := r.Acquire(id, create)
	require.NoError(t, err)
	assert.Same(t, a, b)
	other, err := r.Acquire(component.MustNewIDWithName("gpu", "2"), create)
	require.NoError(t, err)
	assert.NotSame(t, a, other)

	assert.False(t, r.Release(id))
	assert.True(t, r.Release(id))
	assert.False(t, r.Release(id), "released more often than acquired")

	c, err := r.Acquire(id, create)
	require.NoError(t, err)
	assert.NotSame(t, a, c, "a new value after the last release (a reloaded config)")
}

func TestRegistryKeepsNothingWhenCreateFails(t *testing.T) {
	var r Registry[int]
	id := component.MustNewID("gpu")
	_, err := r.Acquire(id, func() (int, error) { return 0, errors.New("boom") })
	require.Error(t, err)
	v, err := r.Acquire(id, func() (int, error) { return 7, nil })
	require.NoError(t, err)
	assert.Equal(t, 7, v)
}
