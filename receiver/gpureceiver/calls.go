package gpureceiver // import "github.com/loom-otel/loom/receiver/gpureceiver"

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
)

// seriesKey is one series of the call metrics.
type seriesKey struct {
	pid                            uint32
	command, escape, status, errno string
}

type callSeries struct {
	key     seriesKey
	calls   uint64
	sumNs   uint64
	buckets [ioctltrace.HistogramBuckets]uint64
	seen    uint64 // scrape number of the last change
}

// kernelKey identifies one entry of the BPF program's counter map.
type kernelKey struct {
	pid     uint32
	command string
	kind    ioctltrace.Kind
	nr      uint32
	outcome ioctltrace.Outcome
}

// callTable turns the kernel's counters into cumulative series. The
// kernel's map is an LRU: an entry it evicted and started again counts
// from zero, so totals grow by deltas against the previous reading. It
// keeps series for at most maxProcesses processes, dropping those whose
// counts changed least recently.
type callTable struct {
	maxProcesses int
	scrapes      uint64
	last         map[kernelKey]ioctltrace.Stat
	series       map[seriesKey]*callSeries
}

func newCallTable(maxProcesses int) *callTable {
	return &callTable{maxProcesses: maxProcesses, last: map[kernelKey]ioctltrace.Stat{}, series: map[seriesKey]*callSeries{}}
}

// update adds a reading and returns every series, ordered.
func (t *callTable) update(stats []ioctltrace.Stat) []*callSeries {
	t.scrapes++
	current := make(map[kernelKey]ioctltrace.Stat, len(stats))
	for _, s := range stats {
		k := kernelKey{s.PID, s.ProcessComm, s.Kind, s.Nr, s.Outcome}
		current[k] = s
		prev, ok := t.last[k]
		if ok && s.Calls == prev.Calls {
			continue
		}
		if !ok || s.Calls < prev.Calls {
			prev = ioctltrace.Stat{}
		}
		sk := seriesKey{s.PID, s.ProcessComm, ioctltrace.EscapeName(s.Kind, s.Nr), s.Outcome.StatusName(), s.Outcome.ErrnoName()}
		c := t.series[sk]
		if c == nil {
			c = &callSeries{key: sk}
			t.series[sk] = c
		}
		c.calls += s.Calls - prev.Calls
		c.sumNs += s.SumNs - prev.SumNs
		for i := range c.buckets {
			c.buckets[i] += s.Buckets[i] - prev.Buckets[i]
		}
		c.seen = t.scrapes
	}
	t.last = current
	t.evict()

	out := make([]*callSeries, 0, len(t.series))
	for _, c := range t.series {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *callSeries) int {
		x, y := a.key, b.key
		return cmp.Or(cmp.Compare(x.pid, y.pid), cmp.Compare(x.escape, y.escape), cmp.Compare(x.status, y.status),
			cmp.Compare(x.errno, y.errno), cmp.Compare(x.command, y.command))
	})
	return out
}

func (t *callTable) evict() {
	latest := map[uint32]uint64{}
	for _, c := range t.series {
		latest[c.key.pid] = max(latest[c.key.pid], c.seen)
	}
	if len(latest) <= t.maxProcesses {
		return
	}
	pids := slices.Collect(maps.Keys(latest))
	slices.SortFunc(pids, func(a, b uint32) int { return cmp.Or(cmp.Compare(latest[a], latest[b]), cmp.Compare(a, b)) })
	drop := map[uint32]bool{}
	for _, pid := range pids[:len(pids)-t.maxProcesses] {
		drop[pid] = true
	}
	for k := range t.series {
		if drop[k.pid] {
			delete(t.series, k)
		}
	}
}

// Histogram bounds are the kernel's log2 buckets from 2^10 ns (about 1 µs)
// to 2^34 ns (about 17 s): calls faster than 1 µs share the first bucket.
const (
	firstBoundLog2 = 10
	lastBoundLog2  = 34
)

var durationBounds = func() []float64 {
	b := make([]float64, 0, lastBoundLog2-firstBoundLog2+1)
	for i := firstBoundLog2; i <= lastBoundLog2; i++ {
		b = append(b, math.Ldexp(1, i)/1e9)
	}
	return b
}()

// appendDurationHistogram adds nvidia.ioctl.duration. mdatagen's metrics
// builder has no histograms, so this one metric is built here.
func appendDurationHistogram(metrics pmetric.MetricSlice, series []*callSeries, start, now pcommon.Timestamp) {
	m := metrics.AppendEmpty()
	m.SetName("nvidia.ioctl.duration")
	m.SetDescription("Latency of NVIDIA driver ioctls, by process, escape and status (log2 buckets from 1 µs to 17 s).")
	m.SetUnit("s")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, c := range series {
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(now)
		dp.SetCount(c.calls)
		dp.SetSum(float64(c.sumNs) / 1e9)
		dp.ExplicitBounds().FromRaw(durationBounds)
		counts := make([]uint64, len(durationBounds)+1)
		for i, n := range c.buckets {
			counts[min(max(i-firstBoundLog2+1, 0), len(durationBounds))] += n
		}
		dp.BucketCounts().FromRaw(counts)
		a := dp.Attributes()
		a.PutInt("process.pid", int64(c.key.pid))
		a.PutStr("process.command", c.key.command)
		a.PutStr("nvidia.ioctl.escape", c.key.escape)
		a.PutStr("nvidia.ioctl.status", c.key.status)
		a.PutStr("nvidia.ioctl.errno", c.key.errno)
	}
}
