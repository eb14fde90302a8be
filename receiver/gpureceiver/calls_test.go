package gpureceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
)

func stat(pid uint32, nr uint32, calls uint64) ioctltrace.Stat {
	s := ioctltrace.Stat{PID: pid, ProcessComm: "python", Kind: ioctltrace.KindRM, Nr: nr, Calls: calls, SumNs: calls * 2000}
	s.Buckets[10] = calls // [1024, 2048) ns
	s.Outcome = ioctltrace.Outcome{Status: 0x51, StatusKnown: true}
	return s
}

func TestCallTableGrowsByDeltasAcrossKernelEvictions(t *testing.T) {
	table := newCallTable(10)
	series := table.update([]ioctltrace.Stat{stat(1, 0x2B, 5)})
	require.Len(t, series, 1)
	assert.Equal(t, seriesKey{1, "python", "NV_ESC_RM_ALLOC", "NV_ERR_NO_MEMORY", "none"}, series[0].key)
	assert.Equal(t, uint64(5), series[0].calls)

	series = table.update([]ioctltrace.Stat{stat(1, 0x2B, 8)})
	assert.Equal(t, uint64(8), series[0].calls)

	// The kernel's LRU evicted the entry and started it again at 2.
	series = table.update([]ioctltrace.Stat{stat(1, 0x2B, 2)})
	assert.Equal(t, uint64(10), series[0].calls)
	assert.Equal(t, uint64(10), series[0].buckets[10])
	assert.Equal(t, uint64(20000), series[0].sumNs)
}

func TestCallTableKeepsTheMostRecentProcesses(t *testing.T) {
	table := newCallTable(2)
	table.update([]ioctltrace.Stat{stat(1, 0x2A, 1), stat(2, 0x2A, 1)})
	table.update([]ioctltrace.Stat{stat(1, 0x2A, 1), stat(2, 0x2A, 2)})
	series := table.update([]ioctltrace.Stat{stat(1, 0x2A, 1), stat(2, 0x2A, 2), stat(3, 0x2A, 1)})
	var pids []uint32
	for _, s := range series {
		pids = append(pids, s.key.pid)
	}
	assert.Equal(t, []uint32{2, 3}, pids, "pid 1 changed least recently")
}

func TestDurationHistogramBuckets(t *testing.T) {
	c := &callSeries{key: seriesKey{pid: 7}, calls: 4, sumNs: 3_000_000_000}
	c.buckets[3] = 1  // 8 ns: below the first bound
	c.buckets[10] = 1 // [1024, 2048) ns: second bucket
	c.buckets[34] = 1 // [2^34, 2^35) ns: above the last bound
	c.buckets[39] = 1
	ms := pmetric.NewMetricSlice()
	appendDurationHistogram(ms, []*callSeries{c}, pcommon.Timestamp(1), pcommon.Timestamp(2))
	dp := ms.At(0).Histogram().DataPoints().At(0)
	counts := dp.BucketCounts().AsRaw()
	require.Len(t, counts, len(durationBounds)+1)
	assert.Equal(t, uint64(1), counts[0])
	assert.Equal(t, uint64(1), counts[1])
	assert.Equal(t, uint64(2), counts[len(counts)-1])
	assert.InDelta(t, 1.024e-6, dp.ExplicitBounds().At(0), 1e-12)
	assert.InDelta(t, 3.0, dp.Sum(), 1e-9)
	assert.Equal(t, "s", ms.At(0).Unit())
}

func TestDurationHistogramGetsAResourceWhenTheCallsMetricIsOff(t *testing.T) {
	res := pcommon.NewResource()
	res.Attributes().PutStr("host.name", "gpu-node-1")
	ioctl := pmetric.NewMetrics()
	ioctlMetrics(ioctl, res).AppendEmpty().SetName("nvidia.ioctl.duration")
	require.Equal(t, 1, ioctl.ResourceMetrics().Len())
	rm := ioctl.ResourceMetrics().At(0)
	host, _ := rm.Resource().Attributes().Get("host.name")
	assert.Equal(t, "gpu-node-1", host.Str())
	assert.Equal(t, "nvidia.ioctl.duration", rm.ScopeMetrics().At(0).Metrics().At(0).Name())

	ioctlMetrics(ioctl, res).AppendEmpty()
	assert.Equal(t, 1, ioctl.ResourceMetrics().Len(), "the second metric joins the first")
}
