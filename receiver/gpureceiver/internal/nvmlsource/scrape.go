//go:build nvml

package nvmlsource // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/nvmlsource"

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

// readComm returns a process's command name, or "" where /proc does not
// show the process (it runs in another pid namespace). Tests replace it.
var readComm = func(pid uint32) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// Scrape records the metrics of every GPU, MIG device and compute process
// into mb, one resource per device, and returns the gpu.memory.high records
// due. A query that fails leaves out its metrics only.
func (s *Source) Scrape(mb *metadata.MetricsBuilder, now pcommon.Timestamp) (plog.Logs, error) {
	logs := plog.NewLogs()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return logs, errClosed
	}
	for _, d := range s.gpus {
		migs := s.migDevices(d)
		s.recordUtilization(mb, d, now)
		s.recordMemory(mb, d, now, logs)
		s.recordHealth(mb, d, now)
		if s.opts.GPM {
			s.recordGPM(mb, d, now)
		}
		// On a GPU in MIG mode NVML lists the processes of all its MIG
		// devices; they are reported once, on their MIG device.
		if len(migs) == 0 {
			s.recordProcesses(mb, d, now)
		}
		mb.EmitForResource(metadata.WithResource(s.resource(mb, d)))
		for _, m := range migs {
			s.recordMemory(mb, m, now, logs)
			s.recordProcesses(mb, m, now)
			mb.EmitForResource(metadata.WithResource(s.resource(mb, m)))
		}
	}
	return logs, nil
}

func (s *Source) resource(mb *metadata.MetricsBuilder, d *device) pcommon.Resource {
	rb := mb.NewResourceBuilder()
	set := func(f func(string), v string) {
		if v != "" {
			f(v)
		}
	}
	set(rb.SetHostName, d.host)
	rb.SetHwID(d.id)
	rb.SetGpuID(d.id)
	set(rb.SetHwName, d.name)
	set(rb.SetHwModel, d.model)
	rb.SetHwVendor("NVIDIA")
	rb.SetHwType("gpu")
	set(rb.SetHwDriverVersion, s.driverVersion)
	set(rb.SetHwSerialNumber, d.serial)
	gpu := d
	if d.parent != nil {
		gpu = d.parent
		rb.SetHwParent(gpu.id)
		rb.SetNvidiaMigGpuInstanceID(int64(d.gi))
		rb.SetNvidiaMigComputeInstanceID(int64(d.ci))
	}
	rb.SetNvidiaGpuIndex(int64(gpu.index))
	return rb.Emit()
}

// migDevices returns the MIG devices of gpu when MIG is on. They are listed
// on every Scrape, as MIG instances come and go without a GPU reset.
func (s *Source) migDevices(gpu *device) []*device {
	if !s.opts.MIG {
		return nil
	}
	mode, ok := call(s, gpu, "nvmlDeviceGetMigMode", func() (int, nvml.Return) {
		current, _, ret := gpu.handle.GetMigMode()
		return current, ret
	})
	if !ok || mode != nvml.DEVICE_MIG_ENABLE {
		gpu.migs = nil
		return nil
	}
	n, ok := call(s, gpu, "nvmlDeviceGetMaxMigDeviceCount", gpu.handle.GetMaxMigDeviceCount)
	if !ok {
		return nil
	}
	var migs []*device
	seen := map[string]*device{}
	for i := range n {
		h, ret := gpu.handle.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND {
			continue // no MIG device in this slot
		}
		if ret != nvml.SUCCESS {
			s.failed(gpu, "nvmlDeviceGetMigDeviceHandleByIndex", ret)
			continue
		}
		uuid, ok := call(s, gpu, "nvmlDeviceGetUUID(MIG)", h.GetUUID)
		if !ok {
			continue
		}
		m := gpu.migs[uuid]
		if m == nil {
			if m = s.newMIG(gpu, h, uuid); m == nil {
				continue
			}
		}
		m.handle = h
		seen[uuid] = m
		migs = append(migs, m)
	}
	// Forgetting MIG devices that are gone keeps the state bounded.
	gpu.migs = seen
	return migs
}

func (s *Source) newMIG(gpu *device, h nvml.Device, uuid string) *device {
	m := newDevice(h, identity{host: s.opts.HostName, id: uuid, model: gpu.model})
	m.parent, m.index = gpu, gpu.index
	var ok bool
	if m.gi, ok = call(s, m, "nvmlDeviceGetGpuInstanceId", h.GetGpuInstanceId); !ok {
		return nil
	}
	if m.ci, ok = call(s, m, "nvmlDeviceGetComputeInstanceId", h.GetComputeInstanceId); !ok {
		return nil
	}
	// A MIG device's name includes its profile, e.g. "NVIDIA H100 80GB HBM3 MIG 1g.10gb".
	if name, ok := call(s, m, "nvmlDeviceGetName", h.GetName); ok {
		m.model = name
	}
	if gpu.name != "" {
		m.name = fmt.Sprintf("%s/gi%d/ci%d", gpu.name, m.gi, m.ci)
	}
	return m
}

func percent(v uint32) float64 { return float64(v) / 100 }

// recordUtilization is for GPUs only: NVML has no utilization for MIG devices.
func (s *Source) recordUtilization(mb *metadata.MetricsBuilder, d *device, now pcommon.Timestamp) {
	h := d.handle
	if u, ok := call(s, d, "nvmlDeviceGetUtilizationRates", h.GetUtilizationRates); ok {
		mb.RecordHwGpuUtilizationDataPoint(now, percent(u.Gpu), metadata.AttributeHwGpuTaskGeneral)
		mb.RecordNvidiaGpuMemoryActivityDataPoint(now, percent(u.Memory))
	}
	engines := []struct {
		fn    string
		query func() (uint32, uint32, nvml.Return) // utilization, sampling period
		task  metadata.AttributeHwGpuTask
	}{
		{"nvmlDeviceGetEncoderUtilization", h.GetEncoderUtilization, metadata.AttributeHwGpuTaskEncoder},
		{"nvmlDeviceGetDecoderUtilization", h.GetDecoderUtilization, metadata.AttributeHwGpuTaskDecoder},
	}
	for _, e := range engines {
		u, ok := call(s, d, e.fn, func() (uint32, nvml.Return) {
			u, _, ret := e.query()
			return u, ret
		})
		if ok {
			mb.RecordHwGpuUtilizationDataPoint(now, percent(u), e.task)
		}
	}
}

const memoryInfoV2 = "nvmlDeviceGetMemoryInfo_v2"

func (s *Source) recordMemory(mb *metadata.MetricsBuilder, d *device, now pcommon.Timestamp, logs plog.Logs) {
	var used, total uint64
	if m, ok := call(s, d, memoryInfoV2, d.handle.GetMemoryInfo_v2); ok {
		used, total = m.Used, m.Total
		mb.RecordNvidiaGpuMemoryFreeDataPoint(now, int64(m.Free))
		mb.RecordNvidiaGpuMemoryReservedDataPoint(now, int64(m.Reserved))
	} else if !s.isUnsupported(d, memoryInfoV2) {
		return // failed, and counted
	} else if m, ok := call(s, d, "nvmlDeviceGetMemoryInfo", d.handle.GetMemoryInfo); ok {
		// Version 1 (drivers before R510) has no reserved figure.
		used, total = m.Used, m.Total
		mb.RecordNvidiaGpuMemoryFreeDataPoint(now, int64(m.Free))
	} else {
		return
	}
	mb.RecordHwGpuMemoryUsageDataPoint(now, int64(used))
	mb.RecordHwGpuMemoryLimitDataPoint(now, int64(total))
	if total == 0 {
		return
	}
	ratio := float64(used) / float64(total)
	mb.RecordHwGpuMemoryUtilizationDataPoint(now, ratio)
	if limit := s.opts.MemoryHighRatio; limit > 0 {
		high := ratio >= limit
		if high && !d.memHigh {
			appendMemoryHigh(logs, d.identity, used, total, now)
		}
		d.memHigh = high
	}
}

var clocks = []struct {
	typ  nvml.ClockType
	fn   string
	attr metadata.AttributeClock
}{
	{nvml.CLOCK_SM, "nvmlDeviceGetClockInfo(SM)", metadata.AttributeClockSm},
	{nvml.CLOCK_MEM, "nvmlDeviceGetClockInfo(MEM)", metadata.AttributeClockMemory},
	{nvml.CLOCK_GRAPHICS, "nvmlDeviceGetClockInfo(GRAPHICS)", metadata.AttributeClockGraphics},
}

var pcieCounters = []struct {
	counter nvml.PcieUtilCounter
	fn      string
	attr    metadata.AttributeDirection
}{
	{nvml.PCIE_UTIL_TX_BYTES, "nvmlDeviceGetPcieThroughput(TX)", metadata.AttributeDirectionTransmit},
	{nvml.PCIE_UTIL_RX_BYTES, "nvmlDeviceGetPcieThroughput(RX)", metadata.AttributeDirectionReceive},
}

var eccCounters = []struct {
	typ  nvml.MemoryErrorType
	fn   string
	attr metadata.AttributeErrorType
}{
	{nvml.MEMORY_ERROR_TYPE_CORRECTED, "nvmlDeviceGetTotalEccErrors(CORRECTED)", metadata.AttributeErrorTypeEccCorrected},
	{nvml.MEMORY_ERROR_TYPE_UNCORRECTED, "nvmlDeviceGetTotalEccErrors(UNCORRECTED)", metadata.AttributeErrorTypeEccUncorrected},
}

// recordHealth records what belongs to the board: on a GPU in MIG mode it
// is reported on the GPU, not its MIG devices.
func (s *Source) recordHealth(mb *metadata.MetricsBuilder, d *device, now pcommon.Timestamp) {
	h := d.handle
	// Deprecated in NVML 13 for nvmlDeviceGetTemperatureV, which older
	// drivers lack.
	if t, ok := call(s, d, "nvmlDeviceGetTemperature", func() (uint32, nvml.Return) { return h.GetTemperature(nvml.TEMPERATURE_GPU) }); ok {
		mb.RecordNvidiaGpuTemperatureDataPoint(now, float64(t))
	}
	if mW, ok := call(s, d, "nvmlDeviceGetPowerUsage", h.GetPowerUsage); ok {
		mb.RecordHwPowerDataPoint(now, float64(mW)/1e3)
	}
	if mJ, ok := call(s, d, "nvmlDeviceGetTotalEnergyConsumption", h.GetTotalEnergyConsumption); ok {
		mb.RecordHwEnergyDataPoint(now, float64(mJ)/1e3)
	}
	for _, c := range clocks {
		if mhz, ok := call(s, d, c.fn, func() (uint32, nvml.Return) { return h.GetClockInfo(c.typ) }); ok {
			mb.RecordNvidiaGpuClockFrequencyDataPoint(now, float64(mhz)*1e6, c.attr)
		}
	}
	for _, c := range pcieCounters {
		// NVML's KB are KiB, as everywhere in its API.
		if kb, ok := call(s, d, c.fn, func() (uint32, nvml.Return) { return h.GetPcieThroughput(c.counter) }); ok {
			mb.RecordNvidiaGpuPcieThroughputDataPoint(now, float64(kb)*1024, c.attr)
		}
	}
	if n, ok := call(s, d, "nvmlDeviceGetPcieReplayCounter", h.GetPcieReplayCounter); ok {
		mb.RecordNvidiaGpuPcieReplayDataPoint(now, int64(n))
	}
	for _, c := range eccCounters {
		if n, ok := call(s, d, c.fn, func() (uint64, nvml.Return) { return h.GetTotalEccErrors(c.typ, nvml.VOLATILE_ECC) }); ok {
			mb.RecordHwErrorsDataPoint(now, int64(n), c.attr)
		}
	}
	type remapped struct {
		correctable, uncorrectable int
		pending, failed            bool
	}
	if r, ok := call(s, d, "nvmlDeviceGetRemappedRows", func() (remapped, nvml.Return) {
		c, u, p, f, ret := h.GetRemappedRows()
		return remapped{c, u, p, f}, ret
	}); ok {
		mb.RecordNvidiaGpuRemappedRowsDataPoint(now, int64(r.correctable), metadata.AttributeRemapCauseCorrectable)
		mb.RecordNvidiaGpuRemappedRowsDataPoint(now, int64(r.uncorrectable), metadata.AttributeRemapCauseUncorrectable)
		mb.RecordNvidiaGpuRemappedRowsPendingDataPoint(now, boolInt(r.pending))
		mb.RecordNvidiaGpuRemappedRowsFailedDataPoint(now, boolInt(r.failed))
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (s *Source) recordProcesses(mb *metadata.MetricsBuilder, d *device, now pcommon.Timestamp) {
	procs, _ := call(s, d, "nvmlDeviceGetComputeRunningProcesses", d.handle.GetComputeRunningProcesses)
	for _, p := range procs {
		// NVML_VALUE_NOT_AVAILABLE: NVML may not tell, e.g. without the
		// privileges to see other users' processes.
		if p.UsedGpuMemory == math.MaxUint64 {
			continue
		}
		mb.RecordNvidiaGpuProcessMemoryUsageDataPoint(now, int64(p.UsedGpuMemory), int64(p.Pid), readComm(p.Pid))
	}
}

// gpmMinInterval is the shortest span between two GPM samples NVML computes
// metrics from.
const gpmMinInterval = 100 * time.Millisecond

// gpmMetrics are the GPM metrics recorded; NVML reports them in percent.
var gpmMetrics = []struct {
	id     nvml.GpmMetricId
	fn     string
	record func(*metadata.MetricsBuilder, pcommon.Timestamp, float64)
}{
	{nvml.GPM_METRIC_GRAPHICS_UTIL, "nvmlGpmMetricsGet(GRAPHICS_UTIL)", (*metadata.MetricsBuilder).RecordNvidiaGpuGraphicsActivityDataPoint},
	{nvml.GPM_METRIC_SM_UTIL, "nvmlGpmMetricsGet(SM_UTIL)", (*metadata.MetricsBuilder).RecordNvidiaGpuSmActivityDataPoint},
	{nvml.GPM_METRIC_SM_OCCUPANCY, "nvmlGpmMetricsGet(SM_OCCUPANCY)", (*metadata.MetricsBuilder).RecordNvidiaGpuSmOccupancyDataPoint},
	{nvml.GPM_METRIC_ANY_TENSOR_UTIL, "nvmlGpmMetricsGet(ANY_TENSOR_UTIL)", (*metadata.MetricsBuilder).RecordNvidiaGpuTensorActivityDataPoint},
	{nvml.GPM_METRIC_DRAM_BW_UTIL, "nvmlGpmMetricsGet(DRAM_BW_UTIL)", (*metadata.MetricsBuilder).RecordNvidiaGpuDramActivityDataPoint},
	{nvml.GPM_METRIC_FP64_UTIL, "nvmlGpmMetricsGet(FP64_UTIL)", pipe(metadata.AttributePipeFp64)},
	{nvml.GPM_METRIC_FP32_UTIL, "nvmlGpmMetricsGet(FP32_UTIL)", pipe(metadata.AttributePipeFp32)},
	{nvml.GPM_METRIC_FP16_UTIL, "nvmlGpmMetricsGet(FP16_UTIL)", pipe(metadata.AttributePipeFp16)},
	{nvml.GPM_METRIC_DFMA_TENSOR_UTIL, "nvmlGpmMetricsGet(DFMA_TENSOR_UTIL)", pipe(metadata.AttributePipeDfma)},
	{nvml.GPM_METRIC_HMMA_TENSOR_UTIL, "nvmlGpmMetricsGet(HMMA_TENSOR_UTIL)", pipe(metadata.AttributePipeHmma)},
	{nvml.GPM_METRIC_IMMA_TENSOR_UTIL, "nvmlGpmMetricsGet(IMMA_TENSOR_UTIL)", pipe(metadata.AttributePipeImma)},
}

func pipe(p metadata.AttributePipe) func(*metadata.MetricsBuilder, pcommon.Timestamp, float64) {
	return func(mb *metadata.MetricsBuilder, ts pcommon.Timestamp, v float64) {
		mb.RecordNvidiaGpuPipeActivityDataPoint(ts, v, p)
	}
}

func (s *Source) gpmSupported(d *device) bool {
	if !d.gpmKnown {
		sup, ok := call(s, d, "nvmlGpmQueryDeviceSupport", d.handle.GpmQueryDeviceSupport)
		if !ok {
			return false
		}
		d.gpmKnown, d.gpmOK = true, sup.IsSupportedDevice != 0
	}
	return d.gpmOK
}

// recordGPM takes a GPM sample and, from it and the previous one, records
// the GPM metrics: GPM reports activity between two samples.
func (s *Source) recordGPM(mb *metadata.MetricsBuilder, d *device, now pcommon.Timestamp) {
	if !s.gpmSupported(d) {
		return
	}
	sample, ok := call(s, d, "nvmlGpmSampleAlloc", s.lib.GpmSampleAlloc)
	if !ok {
		return
	}
	if !do(s, d, "nvmlGpmSampleGet", func() nvml.Return { return s.lib.GpmSampleGet(d.handle, sample) }) {
		_ = sample.Free()
		return
	}
	prev, at := d.gpmSample, now.AsTime()
	if prev != nil && at.Sub(d.gpmAt) < gpmMinInterval {
		// Keep the older sample, so that the next Scrape spans enough time.
		_ = sample.Free()
		return
	}
	d.gpmSample, d.gpmAt = sample, at
	if prev == nil {
		return
	}
	defer func() { _ = prev.Free() }()
	req := &nvml.GpmMetricsGetType{Sample1: prev, Sample2: sample}
	var asked []int // indexes in gpmMetrics of req.Metrics
	for i, m := range gpmMetrics {
		if !s.isUnsupported(d, m.fn) {
			req.Metrics[len(asked)].MetricId = uint32(m.id)
			asked = append(asked, i)
		}
	}
	req.NumMetrics = uint32(len(asked))
	if len(asked) == 0 || !do(s, d, "nvmlGpmMetricsGet", func() nvml.Return { return s.lib.GpmMetricsGet(req) }) {
		return
	}
	for j, i := range asked {
		got, m := req.Metrics[j], gpmMetrics[i]
		if ret := nvml.Return(got.NvmlReturn); ret != nvml.SUCCESS {
			s.failed(d, m.fn, ret)
			continue
		}
		m.record(mb, now, got.Value/100)
	}
}
