//go:build nvml

package nvmlsource

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadatatest"
)

const (
	gpuUUID = "GPU-11111111-2222-3333-4444-555555555555"
	gib     = uint64(1) << 30
)

var t0 = time.Unix(1715234890, 0)

func ts(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t0.Add(d)) }

// newGPU is an H100 with every query answered. Tests change what they need;
// a query whose Func is nil panics, which proves it is not made.
func newGPU(uuid string, minor int) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:        func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNameFunc:        func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetSerialFunc:      func() (string, nvml.Return) { return "1650123456789", nvml.SUCCESS },
		GetMinorNumberFunc: func() (int, nvml.Return) { return minor, nvml.SUCCESS },
		GetMigModeFunc:     func() (int, int, nvml.Return) { return 0, 0, nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 75, Memory: 40}, nvml.SUCCESS
		},
		GetEncoderUtilizationFunc: func() (uint32, uint32, nvml.Return) { return 10, 167000, nvml.SUCCESS },
		GetDecoderUtilizationFunc: func() (uint32, uint32, nvml.Return) { return 20, 167000, nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 80 * gib, Reserved: gib / 2, Used: 20 * gib, Free: 80*gib - gib/2 - 20*gib}, nvml.SUCCESS
		},
		GetTemperatureFunc: func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 65, nvml.SUCCESS },
		GetPowerUsageFunc:  func() (uint32, nvml.Return) { return 250500, nvml.SUCCESS },
		GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) {
			return 123456789, nvml.SUCCESS
		},
		GetClockInfoFunc: func(c nvml.ClockType) (uint32, nvml.Return) {
			return map[nvml.ClockType]uint32{nvml.CLOCK_SM: 1980, nvml.CLOCK_MEM: 2619, nvml.CLOCK_GRAPHICS: 1755}[c], nvml.SUCCESS
		},
		GetPcieThroughputFunc: func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
			return map[nvml.PcieUtilCounter]uint32{nvml.PCIE_UTIL_TX_BYTES: 1000, nvml.PCIE_UTIL_RX_BYTES: 2000}[c], nvml.SUCCESS
		},
		GetPcieReplayCounterFunc: func() (int, nvml.Return) { return 3, nvml.SUCCESS },
		GetTotalEccErrorsFunc: func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
			if c != nvml.VOLATILE_ECC {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return map[nvml.MemoryErrorType]uint64{nvml.MEMORY_ERROR_TYPE_CORRECTED: 5, nvml.MEMORY_ERROR_TYPE_UNCORRECTED: 1}[t], nvml.SUCCESS
		},
		GetRemappedRowsFunc: func() (int, int, bool, bool, nvml.Return) { return 2, 1, true, false, nvml.SUCCESS },
		GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
			return nvml.GpmSupport{IsSupportedDevice: 0}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 4242, UsedGpuMemory: 3 * gib}}, nvml.SUCCESS
		},
	}
}

func newLib(devs ...*mock.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) { return devs[i], nvml.SUCCESS },
	}
}

// open opens a Source on lib, with /proc/<pid>/comm answered by comms.
func open(t *testing.T, lib nvml.Interface, opts Options, comms map[uint32]string) *Source {
	t.Helper()
	stub(t, &newLibrary, func() nvml.Interface { return lib })
	stub(t, &readComm, func(pid uint32) string { return comms[pid] })
	if opts.HostName == "" {
		opts.HostName = "node-1"
	}
	s, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func stub[T any](t *testing.T, v *T, with T) {
	old := *v
	*v = with
	t.Cleanup(func() { *v = old })
}

func newMB() *metadata.MetricsBuilder {
	return metadata.NewMetricsBuilder(metadata.NewDefaultMetricsBuilderConfig(), receivertest.NewNopSettings(metadata.Type))
}

// scrape runs one Scrape and returns its metrics and logs.
func scrape(t *testing.T, s *Source, at pcommon.Timestamp) (pmetric.Metrics, plog.Logs) {
	t.Helper()
	mb := newMB()
	logs, err := s.Scrape(mb, at)
	require.NoError(t, err)
	return mb.Emit(), logs
}

// resources flattens md: by hw.id, each data point as "metric{attr=value,…}" → value.
func resources(t *testing.T, md pmetric.Metrics) map[string]map[string]float64 {
	t.Helper()
	out := map[string]map[string]float64{}
	for _, rm := range md.ResourceMetrics().All() {
		id, ok := rm.Resource().Attributes().Get("hw.id")
		require.True(t, ok)
		points := map[string]float64{}
		out[id.Str()] = points
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				var dps pmetric.NumberDataPointSlice
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					dps = m.Gauge().DataPoints()
				case pmetric.MetricTypeSum:
					dps = m.Sum().DataPoints()
				default:
					t.Fatalf("%s: unexpected type %v", m.Name(), m.Type())
				}
				for _, dp := range dps.All() {
					var attrs []string
					for k, v := range dp.Attributes().All() {
						attrs = append(attrs, k+"="+v.AsString())
					}
					slices.Sort(attrs)
					key := m.Name()
					if len(attrs) > 0 {
						key += "{" + strings.Join(attrs, ",") + "}"
					}
					v := dp.DoubleValue()
					if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
						v = float64(dp.IntValue())
					}
					points[key] = v
				}
			}
		}
	}
	return out
}

func resourceAttrs(md pmetric.Metrics, id string) map[string]any {
	for _, rm := range md.ResourceMetrics().All() {
		if v, _ := rm.Resource().Attributes().Get("hw.id"); v.Str() == id {
			return rm.Resource().Attributes().AsRaw()
		}
	}
	return nil
}

func TestScrapeRecordsEveryMetric(t *testing.T) {
	s := open(t, newLib(newGPU(gpuUUID, 3)), Options{}, map[uint32]string{4242: "python3"})
	md, logs := scrape(t, s, ts(0))
	assert.Zero(t, logs.LogRecordCount())

	got := resources(t, md)
	require.Len(t, got, 1)
	assert.Equal(t, map[string]float64{
		"hw.gpu.utilization{hw.gpu.task=general}":                                   0.75,
		"hw.gpu.utilization{hw.gpu.task=encoder}":                                   0.10,
		"hw.gpu.utilization{hw.gpu.task=decoder}":                                   0.20,
		"nvidia.gpu.memory.activity":                                                0.40,
		"hw.gpu.memory.usage":                                                       float64(20 * gib),
		"hw.gpu.memory.limit":                                                       float64(80 * gib),
		"hw.gpu.memory.utilization":                                                 0.25,
		"nvidia.gpu.memory.free":                                                    float64(80*gib - gib/2 - 20*gib),
		"nvidia.gpu.memory.reserved":                                                float64(gib / 2),
		"nvidia.gpu.temperature":                                                    65,
		"hw.power":                                                                  250.5,      // mW → W
		"hw.energy":                                                                 123456.789, // mJ → J
		"nvidia.gpu.clock.frequency{nvidia.gpu.clock=sm}":                           1980e6,     // MHz → Hz
		"nvidia.gpu.clock.frequency{nvidia.gpu.clock=memory}":                       2619e6,
		"nvidia.gpu.clock.frequency{nvidia.gpu.clock=graphics}":                     1755e6,
		"nvidia.gpu.pcie.throughput{network.io.direction=transmit}":                 1000 * 1024, // KiB/s → By/s
		"nvidia.gpu.pcie.throughput{network.io.direction=receive}":                  2000 * 1024,
		"nvidia.gpu.pcie.replay":                                                    3,
		"hw.errors{error.type=ecc_corrected}":                                       5,
		"hw.errors{error.type=ecc_uncorrected}":                                     1,
		"nvidia.gpu.remapped_rows{nvidia.gpu.remap.cause=correctable}":              2,
		"nvidia.gpu.remapped_rows{nvidia.gpu.remap.cause=uncorrectable}":            1,
		"nvidia.gpu.remapped_rows.pending":                                          1,
		"nvidia.gpu.remapped_rows.failed":                                           0,
		"nvidia.gpu.process.memory.usage{process.command=python3,process.pid=4242}": float64(3 * gib),
	}, got[gpuUUID])

	assert.Equal(t, map[string]any{
		"host.name":         "node-1",
		"hw.id":             gpuUUID,
		"gpu.id":            gpuUUID,
		"hw.name":           "nvidia3",
		"hw.model":          "NVIDIA H100 80GB HBM3",
		"hw.vendor":         "NVIDIA",
		"hw.type":           "gpu",
		"hw.driver_version": "550.54.15",
		"hw.serial_number":  "1650123456789",
		"nvidia.gpu.index":  int64(0),
	}, resourceAttrs(md, gpuUUID))

	units := map[string]string{}
	for _, m := range md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().All() {
		units[m.Name()] = m.Unit()
	}
	for name, unit := range map[string]string{
		"hw.power": "W", "hw.energy": "J", "nvidia.gpu.clock.frequency": "Hz", "nvidia.gpu.pcie.throughput": "By/s",
		"nvidia.gpu.temperature": "Cel", "hw.gpu.utilization": "1", "hw.gpu.memory.usage": "By",
	} {
		assert.Equal(t, unit, units[name], name)
	}
	assert.Equal(t, metadata.ScopeName, md.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope().Name())
}

func TestScrapeFallsBackToMemoryInfoV1(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	require.NoError(t, err)

	gpu := newGPU(gpuUUID, 0)
	gpu.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED }
	gpu.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 16 * gib, Used: 4 * gib, Free: 12 * gib}, nvml.SUCCESS
	}
	s := open(t, newLib(gpu), Options{Telemetry: tb}, nil)
	for range 2 {
		md, _ := scrape(t, s, ts(0))
		got := resources(t, md)[gpuUUID]
		assert.Equal(t, float64(4*gib), got["hw.gpu.memory.usage"])
		assert.Equal(t, float64(16*gib), got["hw.gpu.memory.limit"])
		assert.Equal(t, float64(12*gib), got["nvidia.gpu.memory.free"])
		assert.Equal(t, 0.25, got["hw.gpu.memory.utilization"])
		assert.NotContains(t, got, "nvidia.gpu.memory.reserved")
	}
	assert.Len(t, gpu.GetMemoryInfo_v2Calls(), 1)
	assert.Len(t, gpu.GetMemoryInfoCalls(), 2)
	_, err = tel.GetMetric("otelcol_receiver_gpu_nvml_errors")
	assert.Error(t, err, "NOT_SUPPORTED is not an error")
}

func TestOpenSkipsFunctionsTheLibraryLacks(t *testing.T) {
	gpu := newGPU(gpuUUID, 0)
	gpu.GetMemoryInfo_v2Func = nil // panics if called
	gpu.GpmQueryDeviceSupportFunc = nil
	gpu.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 16 * gib, Used: 4 * gib, Free: 12 * gib}, nvml.SUCCESS
	}
	lib := newLib(gpu)
	lib.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(name string) error {
			if name == "nvmlDeviceGetMemoryInfo_v2" || strings.HasPrefix(name, "nvmlGpm") {
				return errors.New("undefined symbol")
			}
			return nil
		}}
	}
	s := open(t, lib, Options{GPM: true}, nil)
	md, _ := scrape(t, s, ts(0))
	assert.Equal(t, float64(4*gib), resources(t, md)[gpuUUID]["hw.gpu.memory.usage"])
}

const (
	migA = "MIG-aaaaaaaa-0000-0000-0000-000000000001"
	migB = "MIG-bbbbbbbb-0000-0000-0000-000000000002"
)

func newMIG(uuid string, gi, ci int, used uint64, pid uint32) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return gi, nvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ci, nvml.SUCCESS },
		GetNameFunc:              func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3 MIG 3g.40gb", nvml.SUCCESS },
		GetMemoryInfo_v2Func: func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: 40 * gib, Used: used, Free: 40*gib - used}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: used}}, nvml.SUCCESS
		},
		// No utilization, temperature, power…: those panic if asked.
	}
}

func TestMIGDevicesAreResourcesOfTheirOwn(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	require.NoError(t, err)

	gpu := newGPU(gpuUUID, 0)
	gpu.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS }
	// In MIG mode NVML has no utilization for the GPU either.
	notSupported := func() (uint32, uint32, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	gpu.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	gpu.GetEncoderUtilizationFunc, gpu.GetDecoderUtilizationFunc = notSupported, notSupported
	gpu.GetComputeRunningProcessesFunc = nil // asked on the MIG devices instead
	migs := []*mock.Device{newMIG(migA, 1, 0, 10*gib, 100), nil, newMIG(migB, 2, 0, 20*gib, 200)}
	gpu.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return len(migs), nvml.SUCCESS }
	gpu.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if migs[i] == nil {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return migs[i], nvml.SUCCESS
	}

	s := open(t, newLib(gpu), Options{MIG: true, Telemetry: tb}, map[uint32]string{100: "vllm", 200: "trtllm"})
	md, _ := scrape(t, s, ts(0))
	got := resources(t, md)
	require.Len(t, got, 3)
	assert.NotContains(t, got[gpuUUID], "hw.gpu.utilization{hw.gpu.task=general}")
	assert.Contains(t, got[gpuUUID], "hw.power")
	assert.Equal(t, map[string]float64{
		"hw.gpu.memory.usage":        float64(10 * gib),
		"hw.gpu.memory.limit":        float64(40 * gib),
		"hw.gpu.memory.utilization":  0.25,
		"nvidia.gpu.memory.free":     float64(30 * gib),
		"nvidia.gpu.memory.reserved": 0,
		"nvidia.gpu.process.memory.usage{process.command=vllm,process.pid=100}": float64(10 * gib),
	}, got[migA])
	assert.Equal(t, float64(20*gib), got[migB]["nvidia.gpu.process.memory.usage{process.command=trtllm,process.pid=200}"])

	assert.Equal(t, map[string]any{
		"host.name":                      "node-1",
		"hw.id":                          migB,
		"gpu.id":                         migB,
		"hw.parent":                      gpuUUID,
		"hw.name":                        "nvidia0/gi2/ci0",
		"hw.model":                       "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
		"hw.vendor":                      "NVIDIA",
		"hw.type":                        "gpu",
		"hw.driver_version":              "550.54.15",
		"nvidia.gpu.index":               int64(0),
		"nvidia.mig.gpu_instance_id":     int64(2),
		"nvidia.mig.compute_instance_id": int64(0),
	}, resourceAttrs(md, migB))

	// MIG devices are listed again, but what is known about them is kept.
	scrape(t, s, ts(time.Second))
	assert.Len(t, migs[0].GetGpuInstanceIdCalls(), 1)
	assert.Len(t, gpu.GetUtilizationRatesCalls(), 1)
	_, err = tel.GetMetric("otelcol_receiver_gpu_nvml_errors")
	assert.Error(t, err, "NOT_SUPPORTED and empty MIG slots are not errors")
}

// gpmLib is a GPU with GPM, whose samples record whether they were freed.
type gpmLib struct {
	*mock.Interface
	gpu     *mock.Device
	samples []*mock.GpmSample
	freed   map[*mock.GpmSample]bool
	reqs    []nvml.GpmMetricsGetType
}

func newGPMLib() *gpmLib {
	g := &gpmLib{gpu: newGPU(gpuUUID, 0), freed: map[*mock.GpmSample]bool{}}
	g.Interface = newLib(g.gpu)
	g.gpu.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS
	}
	g.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		sample := &mock.GpmSample{}
		sample.FreeFunc = func() nvml.Return { g.freed[sample] = true; return nvml.SUCCESS }
		g.samples = append(g.samples, sample)
		return sample, nvml.SUCCESS
	}
	g.GpmSampleGetFunc = func(nvml.Device, nvml.GpmSample) nvml.Return { return nvml.SUCCESS }
	g.GpmMetricsGetFunc = func(req *nvml.GpmMetricsGetType) nvml.Return {
		g.reqs = append(g.reqs, *req)
		for i := range req.NumMetrics {
			m := &req.Metrics[i]
			switch nvml.GpmMetricId(m.MetricId) {
			case nvml.GPM_METRIC_IMMA_TENSOR_UTIL:
				m.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			default:
				m.Value = float64(m.MetricId) * 5 // 5 %, 10 %, …
			}
		}
		return nvml.SUCCESS
	}
	return g
}

func TestGPMNeedsTwoSamplesAtLeast100msApart(t *testing.T) {
	g := newGPMLib()
	s := open(t, g, Options{GPM: true}, nil)

	md, _ := scrape(t, s, ts(0))
	assert.NotContains(t, resources(t, md)[gpuUUID], "nvidia.gpu.sm.activity", "one sample is not enough")

	md, _ = scrape(t, s, ts(50*time.Millisecond))
	assert.NotContains(t, resources(t, md)[gpuUUID], "nvidia.gpu.sm.activity", "50 ms is too short")
	require.Len(t, g.samples, 2)
	assert.True(t, g.freed[g.samples[1]], "the sample too close to the previous one is freed")
	assert.False(t, g.freed[g.samples[0]], "the older sample is kept")

	md, _ = scrape(t, s, ts(10*time.Second))
	got := resources(t, md)[gpuUUID]
	assert.Equal(t, 0.05, got["nvidia.gpu.graphics.activity"])
	assert.Equal(t, 0.10, got["nvidia.gpu.sm.activity"])
	assert.Equal(t, 0.15, got["nvidia.gpu.sm.occupancy"])
	assert.Equal(t, 0.25, got["nvidia.gpu.tensor.activity"])
	assert.Equal(t, 0.50, got["nvidia.gpu.dram.activity"])
	assert.Equal(t, 0.55, got["nvidia.gpu.pipe.activity{nvidia.gpu.pipe=fp64}"])
	assert.Equal(t, 0.60, got["nvidia.gpu.pipe.activity{nvidia.gpu.pipe=fp32}"])
	assert.Equal(t, 0.65, got["nvidia.gpu.pipe.activity{nvidia.gpu.pipe=fp16}"])
	assert.Equal(t, 0.30, got["nvidia.gpu.pipe.activity{nvidia.gpu.pipe=dfma}"])
	assert.Equal(t, 0.35, got["nvidia.gpu.pipe.activity{nvidia.gpu.pipe=hmma}"])
	assert.NotContains(t, got, "nvidia.gpu.pipe.activity{nvidia.gpu.pipe=imma}")
	require.Len(t, g.reqs, 1)
	assert.Same(t, g.samples[0], g.reqs[0].Sample1)
	assert.Same(t, g.samples[2], g.reqs[0].Sample2)
	assert.Equal(t, uint32(len(gpmMetrics)), g.reqs[0].NumMetrics)
	assert.True(t, g.freed[g.samples[0]], "the previous sample is freed once used")

	scrape(t, s, ts(20*time.Second))
	require.Len(t, g.reqs, 2)
	assert.Equal(t, uint32(len(gpmMetrics)-1), g.reqs[1].NumMetrics, "a metric NOT_SUPPORTED is not asked again")
	assert.Same(t, g.samples[2], g.reqs[1].Sample1)

	require.NoError(t, s.Close())
	for i, sample := range g.samples {
		assert.True(t, g.freed[sample], "sample %d freed by Close", i)
	}
}

func TestGPMUnsupported(t *testing.T) {
	g := newGPMLib()
	g.gpu.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{IsSupportedDevice: 0}, nvml.SUCCESS
	}
	s := open(t, g, Options{GPM: true}, nil)
	for i := range 3 {
		scrape(t, s, ts(time.Duration(i)*time.Second))
	}
	assert.Empty(t, g.samples)
	assert.Len(t, g.gpu.GpmQueryDeviceSupportCalls(), 1)

	g = newGPMLib()
	s = open(t, g, Options{GPM: false}, nil)
	scrape(t, s, ts(0))
	assert.Empty(t, g.gpu.GpmQueryDeviceSupportCalls())
}

func TestProcessMemory(t *testing.T) {
	gpu := newGPU(gpuUUID, 0)
	gpu.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: 1, UsedGpuMemory: gib},
			{Pid: 2, UsedGpuMemory: 2 * gib},        // comm unreadable
			{Pid: 3, UsedGpuMemory: math.MaxUint64}, // NVML_VALUE_NOT_AVAILABLE
		}, nvml.SUCCESS
	}
	s := open(t, newLib(gpu), Options{}, map[uint32]string{1: "python3"})
	md, _ := scrape(t, s, ts(0))
	var procs []string
	for k, v := range resources(t, md)[gpuUUID] {
		if strings.HasPrefix(k, "nvidia.gpu.process.memory.usage") {
			procs = append(procs, fmt.Sprintf("%s=%v", k, v))
		}
	}
	slices.Sort(procs)
	assert.Equal(t, []string{
		fmt.Sprintf("nvidia.gpu.process.memory.usage{process.command=,process.pid=2}=%v", float64(2*gib)),
		fmt.Sprintf("nvidia.gpu.process.memory.usage{process.command=python3,process.pid=1}=%v", float64(gib)),
	}, procs)
}

func TestReadComm(t *testing.T) {
	assert.Equal(t, "nvmlsource.test", readComm(uint32(os.Getpid())))
	assert.Empty(t, readComm(math.MaxUint32))
}

func TestMemoryHighOncePerCrossing(t *testing.T) {
	var used uint64
	gpu := newGPU(gpuUUID, 1)
	gpu.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: 100 * gib, Used: used, Free: 100*gib - used}, nvml.SUCCESS
	}
	s := open(t, newLib(gpu), Options{MemoryHighRatio: 0.95}, nil)

	var emitted []int
	for i, pct := range []uint64{50, 96, 97, 90, 95, 99} {
		used = pct * gib
		_, logs := scrape(t, s, ts(time.Duration(i)*time.Second))
		if logs.LogRecordCount() > 0 {
			require.Equal(t, 1, logs.LogRecordCount())
			emitted = append(emitted, int(pct))
			rl := logs.ResourceLogs().At(0)
			assert.Equal(t, map[string]any{
				"host.name": "node-1", "hw.id": gpuUUID, "gpu.id": gpuUUID, "hw.name": "nvidia1", "hw.model": "NVIDIA H100 80GB HBM3",
			}, rl.Resource().Attributes().AsRaw())
			sl := rl.ScopeLogs().At(0)
			assert.Equal(t, "github.com/loom-otel/loom/receiver/gpureceiver", sl.Scope().Name())
			lr := sl.LogRecords().At(0)
			assert.Equal(t, "gpu.memory.high", lr.EventName())
			assert.Equal(t, plog.SeverityNumberWarn, lr.SeverityNumber())
			assert.Equal(t, ts(time.Duration(i)*time.Second), lr.Timestamp())
			assert.Equal(t, map[string]any{
				"hw.gpu.memory.usage": int64(used), "hw.gpu.memory.limit": int64(100 * gib), "gpu.id": gpuUUID,
			}, lr.Attributes().AsRaw())
		}
	}
	assert.Equal(t, []int{96, 95}, emitted, "once when crossing upward, again after falling below")
}

// eventSet answers Wait with its events, then with timeouts.
type eventSet struct {
	*mock.EventSet
	mu     sync.Mutex
	events []nvml.EventData
}

func newEventSet(events ...nvml.EventData) *eventSet {
	e := &eventSet{events: events}
	e.EventSet = &mock.EventSet{
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		WaitFunc: func(timeout uint32) (nvml.EventData, nvml.Return) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if len(e.events) == 0 {
				time.Sleep(10 * time.Millisecond) // NVML would wait up to timeout
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
			ev := e.events[0]
			e.events = e.events[1:]
			return ev, nvml.SUCCESS
		},
	}
	return e
}

func TestWatchXID(t *testing.T) {
	gpu := newGPU(gpuUUID, 2)
	other := newGPU("GPU-99999999-0000-0000-0000-000000000000", 5)
	other.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeSingleBitEccError, nvml.SUCCESS }
	gpu.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	set := newEventSet(
		nvml.EventData{Device: gpu, EventType: nvml.EventTypeXidCriticalError, EventData: 79},
		nvml.EventData{Device: gpu, EventType: nvml.EventTypeXidCriticalError, EventData: 13},
	)
	gpu.RegisterEventsFunc = func(types uint64, es nvml.EventSet) nvml.Return {
		assert.Equal(t, uint64(nvml.EventTypeXidCriticalError), types)
		assert.Same(t, set.EventSet, es)
		return nvml.SUCCESS
	}
	lib := newLib(gpu, other)
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set.EventSet, nvml.SUCCESS }
	s := open(t, lib, Options{XIDEvents: true}, nil)

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan plog.Logs, 2)
	done := make(chan error)
	go func() { done <- s.WatchXID(ctx, func(l plog.Logs) { got <- l }) }()

	records := make([]plog.LogRecord, 0, 2)
	for range 2 {
		logs := <-got
		require.Equal(t, 1, logs.LogRecordCount())
		rl := logs.ResourceLogs().At(0)
		assert.Equal(t, map[string]any{
			"host.name": "node-1", "hw.id": gpuUUID, "gpu.id": gpuUUID, "hw.name": "nvidia2", "hw.model": "NVIDIA H100 80GB HBM3",
		}, rl.Resource().Attributes().AsRaw())
		assert.Equal(t, metadata.ScopeName, rl.ScopeLogs().At(0).Scope().Name())
		records = append(records, rl.ScopeLogs().At(0).LogRecords().At(0))
	}
	cancel()
	require.NoError(t, <-done)

	lr := records[0]
	assert.Equal(t, "gpu.xid", lr.EventName())
	assert.Equal(t, plog.SeverityNumberError, lr.SeverityNumber())
	assert.Equal(t, "XID 79 on "+gpuUUID+": GPU has fallen off the bus", lr.Body().Str())
	assert.Equal(t, map[string]any{
		"nvidia.xid": int64(79), "nvidia.xid.description": "GPU has fallen off the bus", "gpu.id": gpuUUID,
	}, lr.Attributes().AsRaw())
	assert.NotZero(t, lr.Timestamp())
	assert.Equal(t, plog.SeverityNumberWarn, records[1].SeverityNumber(), "XID 13 is an application error")

	assert.Len(t, gpu.RegisterEventsCalls(), 1)
	assert.Empty(t, other.RegisterEventsCalls(), "a GPU without XID events is not registered")
	assert.Len(t, set.FreeCalls(), 1)
}

func TestWatchXIDStopsOnClose(t *testing.T) {
	gpu := newGPU(gpuUUID, 0)
	gpu.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeXidCriticalError, nvml.SUCCESS }
	gpu.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	set := newEventSet()
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	set.FreeFunc = func() nvml.Return { note("free"); return nvml.SUCCESS }
	lib := newLib(gpu)
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set.EventSet, nvml.SUCCESS }
	lib.ShutdownFunc = func() nvml.Return { note("shutdown"); return nvml.SUCCESS }
	s := open(t, lib, Options{XIDEvents: true}, nil)

	done := make(chan error)
	go func() { done <- s.WatchXID(context.Background(), func(plog.Logs) {}) }()
	require.Eventually(t, func() bool { return len(set.WaitCalls()) > 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, s.Close())
	require.NoError(t, <-done)
	assert.Equal(t, []string{"free", "shutdown"}, order, "the event set is freed before NVML shuts down")
	require.NoError(t, s.WatchXID(context.Background(), nil), "after Close WatchXID returns at once")
}

func TestWatchXIDOff(t *testing.T) {
	lib := newLib(newGPU(gpuUUID, 0)) // EventSetCreateFunc is nil: it would panic
	s := open(t, lib, Options{XIDEvents: false}, nil)
	require.NoError(t, s.WatchXID(context.Background(), nil))
}

func TestOpenInitFailures(t *testing.T) {
	for _, tc := range []struct {
		ret  nvml.Return
		want string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "NVML library libnvidia-ml.so.1 not found: install the NVIDIA driver or mount it into the container"},
		{nvml.ERROR_DRIVER_NOT_LOADED, "NVIDIA kernel driver not loaded"},
		{nvml.ERROR_NO_PERMISSION, "no permission to use the NVIDIA devices"},
		{nvml.ERROR_UNKNOWN, "NVML initialisation failed: nvmlInit returned 999"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			// Only Init is mocked: any other call panics.
			lib := &mock.Interface{InitFunc: func() nvml.Return { return tc.ret }}
			stub(t, &newLibrary, func() nvml.Interface { return lib })
			s, err := Open(Options{})
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tc.want)
			assert.ErrorIs(t, err, tc.ret)
			assert.Len(t, lib.InitCalls(), 1)
		})
	}
}

func TestOpenShutsDownWhenDevicesCannotBeCounted(t *testing.T) {
	lib := newLib()
	lib.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	stub(t, &newLibrary, func() nvml.Interface { return lib })
	_, err := Open(Options{})
	require.ErrorContains(t, err, "nvmlDeviceGetCount")
	assert.Len(t, lib.ShutdownCalls(), 1)
}

func TestFailedQueryIsCountedLoggedAndSparesTheOthers(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	require.NoError(t, err)
	core, logged := observer.New(zapcore.WarnLevel)

	gpu := newGPU(gpuUUID, 0)
	gpu.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	gpu.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c == nvml.CLOCK_MEM {
			return 0, nvml.ERROR_GPU_IS_LOST
		}
		return 1000, nvml.SUCCESS
	}
	s := open(t, newLib(gpu), Options{Telemetry: tb, Logger: zap.New(core)}, nil)
	now := t0
	s.now = func() time.Time { return now }

	for i := range 3 {
		md, _ := scrape(t, s, ts(time.Duration(i)*time.Second))
		got := resources(t, md)[gpuUUID]
		assert.NotContains(t, got, "hw.power")
		assert.Equal(t, 65.0, got["nvidia.gpu.temperature"])
		assert.Equal(t, 1000e6, got["nvidia.gpu.clock.frequency{nvidia.gpu.clock=sm}"])
		assert.NotContains(t, got, "nvidia.gpu.clock.frequency{nvidia.gpu.clock=memory}")
	}
	assert.Len(t, gpu.GetPowerUsageCalls(), 3, "a failure other than NOT_SUPPORTED is retried")

	fn := func(name string) attribute.Set { return attribute.NewSet(attribute.String("function", name)) }
	metadatatest.AssertEqualReceiverGpuNvmlErrors(t, tel, []metricdata.DataPoint[int64]{
		{Value: 3, Attributes: fn("nvmlDeviceGetPowerUsage")},
		{Value: 3, Attributes: fn("nvmlDeviceGetClockInfo")},
	}, metricdatatest.IgnoreTimestamp())

	power := logged.FilterField(zap.String("function", "nvmlDeviceGetPowerUsage"))
	require.Equal(t, 1, power.Len(), "logged once per function and device every 5 minutes")
	assert.Equal(t, gpuUUID, power.All()[0].ContextMap()["gpu.id"])
	assert.Equal(t, 1, logged.FilterField(zap.String("function", "nvmlDeviceGetClockInfo(MEM)")).Len())

	now = now.Add(logEvery)
	scrape(t, s, ts(time.Hour))
	power = logged.FilterField(zap.String("function", "nvmlDeviceGetPowerUsage"))
	require.Equal(t, 2, power.Len())
	assert.Equal(t, int64(2), power.All()[1].ContextMap()["failures_not_logged"])
}

func TestNotSupportedIsNeitherCountedNorAskedAgain(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	tb, err := metadata.NewTelemetryBuilder(tel.NewTelemetrySettings())
	require.NoError(t, err)

	gpu := newGPU(gpuUUID, 0)
	gpu.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	gpu.GetSerialFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED }
	s := open(t, newLib(gpu), Options{Telemetry: tb}, nil)
	for i := range 3 {
		md, _ := scrape(t, s, ts(time.Duration(i)*time.Second))
		assert.NotContains(t, resources(t, md)[gpuUUID], "nvidia.gpu.temperature")
		assert.NotContains(t, resourceAttrs(md, gpuUUID), "hw.serial_number")
		assert.Contains(t, resources(t, md)[gpuUUID], "hw.power")
	}
	assert.Len(t, gpu.GetTemperatureCalls(), 1)
	_, err = tel.GetMetric("otelcol_receiver_gpu_nvml_errors")
	assert.Error(t, err)
}

func TestDeviceByMinor(t *testing.T) {
	noMinor := newGPU("GPU-c", 0)
	noMinor.GetMinorNumberFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	noUUID := newGPU("", 7)
	noUUID.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
	s := open(t, newLib(newGPU("GPU-a", 0), newGPU("GPU-b", 4), noMinor, noUUID), Options{}, nil)
	assert.Equal(t, map[uint32]string{0: "GPU-a", 4: "GPU-b"}, s.DeviceByMinor())

	md, _ := scrape(t, s, ts(0))
	assert.Len(t, resources(t, md), 3, "a GPU without a UUID is left out")
	assert.NotContains(t, resourceAttrs(md, "GPU-c"), "hw.name")
	assert.Equal(t, int64(2), resourceAttrs(md, "GPU-c")["nvidia.gpu.index"])
}

func TestCloseIsIdempotent(t *testing.T) {
	lib := newLib(newGPU(gpuUUID, 0))
	s := open(t, lib, Options{}, nil)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	assert.Len(t, lib.ShutdownCalls(), 1)
	_, err := s.Scrape(newMB(), ts(0))
	assert.ErrorIs(t, err, errClosed)
}
