package gpureceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	cfg := createDefaultConfig().(*Config)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, "custom").String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, 5*time.Second, cfg.CollectionInterval)
	assert.False(t, cfg.NVML.MIG)
	assert.InDelta(t, 0.9, cfg.NVML.MemoryHighRatio, 1e-9)
	require.Len(t, cfg.Ioctl.Devices, 3)
	assert.Equal(t, uint32(195), *cfg.Ioctl.Devices[0].Major)
	assert.Equal(t, ioctltrace.KindUVM, cfg.Ioctl.Devices[1].Kind)
	assert.Equal(t, "/dev/null", cfg.Ioctl.Devices[2].Path)
	assert.Equal(t, 50*time.Millisecond, cfg.Ioctl.SlowThreshold)
	assert.Equal(t, 64, cfg.Ioctl.MaxProcesses)
	assert.Equal(t, KmsgConfig{Enabled: true, Path: "/var/log/kern.fifo", ProcPath: "/host/proc", FromStart: true}, cfg.Kmsg)
	assert.Equal(t, 30*time.Second, cfg.Ioctl.DevicePollInterval)
}

func TestValidateNamesKeyAndFix(t *testing.T) {
	major := uint32(195)
	for name, tc := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"no part":        {func(c *Config) { c.NVML.Enabled, c.Ioctl.Enabled, c.Kmsg.Enabled = false, false, false }, "enable at least one part"},
		"kmsg path":      {func(c *Config) { c.Kmsg.Path = "" }, "kmsg::path: must be set"},
		"ring size":      {func(c *Config) { c.Ioctl.RingBufferSize = 5000 }, "ioctl::ring_buffer_size: must be a power of two"},
		"two selectors":  {func(c *Config) { c.Ioctl.Devices = []ioctltrace.DeviceMatch{{Major: &major, Path: "/dev/x"}} }, "ioctl::devices::0: set exactly one of"},
		"bad kind":       {func(c *Config) { c.Ioctl.Devices[0].Kind = "fb" }, `ioctl::devices::0: kind: "fb" is not rm or uvm`},
		"no devices":     {func(c *Config) { c.Ioctl.Devices = nil }, "ioctl::devices: list at least one device"},
		"slow":           {func(c *Config) { c.Ioctl.SlowThreshold = 0 }, "ioctl::slow_threshold: must be positive"},
		"poll":           {func(c *Config) { c.Ioctl.DevicePollInterval = 0 }, "ioctl::device_poll_interval: must be positive, e.g. 10s"},
		"driver version": {func(c *Config) { c.Ioctl.DriverVersion = "latest" }, "ioctl::driver_version"},
		"memory ratio":   {func(c *Config) { c.NVML.MemoryHighRatio = 95 }, "nvml::memory_high_ratio"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tc.edit(cfg)
			assert.ErrorContains(t, cfg.Validate(), tc.want)
		})
	}
	assert.NoError(t, createDefaultConfig().(*Config).Validate())
}
