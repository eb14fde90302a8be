package goldenfieldprocessor

import (
	"container/list"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadata"
)

// maxPendingDrift bounds the drift events waiting for a logs pipeline to carry them.
const maxPendingDrift = 64

// lineageKey identifies where versions succeed each other: the same kind of
// record (signal, stage) from the same service, of one model family
// (golden.ModelFamily): a service that serves a text and an image model
// has two lineages, and switching between them is no version change.
type lineageKey struct {
	signal, service, stage, family string
}

type lineage struct {
	key      lineageKey
	versions []*series // in order of first appearance
}

// series counts, for the records of one model_ver in a lineage, how often each field is present.
type series struct {
	lineage   *lineage
	version   string
	elem      *list.Element
	prev      *series // the version seen last before this one appeared
	firstSeen time.Time
	records   uint64
	index     map[string]int // field -> position in names and counts
	names     []string
	counts    []uint64
	reported  bool      // this version's drift has been reported
	drifted   driftMark // what its drift lost; set once reported
	evicted   bool
}

// driftMark is what a record of a drifted version is checked against: the
// fields its version lost and the version that carried them.
type driftMark struct {
	oldVersion string
	lost       []string
}

func (s *series) rate(field string) float64 {
	if i, ok := s.index[field]; ok {
		return float64(s.counts[i]) / float64(s.records)
	}
	return 0
}

// driftTracker detects schema drift: records of a new model_ver that stop
// carrying a field the previous version's records nearly always carried. It is
// bounded to MaxSeries series, evicting the least recently seen.
type driftTracker struct {
	cfg DriftConfig

	mu            sync.Mutex
	lineages      map[lineageKey]*lineage
	lru           *list.List // of *series, most recently seen at the front
	pending       []driftEvent
	logsConsumers int // logs pipelines that carry pending events out
	// reported holds the version changes already reported, in order, so that the
	// same change seen in both logs and spans is reported once.
	reported      map[versionChange]struct{}
	reportedOrder []versionChange
}

// versionChange is one drift as an operator sees it: a service's records at a
// stage lost the same fields from one model_ver to the next, whatever the signal.
type versionChange struct {
	service, stage, oldVersion, newVersion, lost string
}

func newDriftTracker(cfg DriftConfig) *driftTracker {
	return &driftTracker{cfg: cfg, lineages: map[lineageKey]*lineage{}, lru: list.New(), reported: map[versionChange]struct{}{}}
}

// firstReport records change and reports whether it is new, remembering at
// most MaxSeries changes.
func (t *driftTracker) firstReport(e *driftEvent) bool {
	lost := make([]string, len(e.lost))
	for i, f := range e.lost {
		lost[i] = f.name
	}
	change := versionChange{e.key.service, e.key.stage, e.oldVersion, e.newVersion, strings.Join(lost, ",")}
	if _, seen := t.reported[change]; seen {
		return false
	}
	if len(t.reportedOrder) == t.cfg.MaxSeries {
		delete(t.reported, t.reportedOrder[0])
		t.reportedOrder = t.reportedOrder[1:]
	}
	t.reported[change] = struct{}{}
	t.reportedOrder = append(t.reportedOrder, change)
	return true
}

// fieldRate is a field's presence rate in the old and the new version.
type fieldRate struct {
	name     string
	old, new float64
}

// driftEvent is one detected schema drift.
type driftEvent struct {
	key                    lineageKey
	oldVersion, newVersion string
	lost, gained           []fieldRate
	oldRecords, newRecords uint64
	firstSeen, detected    time.Time
}

// attachLogs registers a logs pipeline that drains pending events; the returned func detaches it.
func (t *driftTracker) attachLogs() (detach func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logsConsumers++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.logsConsumers--
	}
}

// observe counts the fields of one record of version in the lineage key. It
// returns the number of series evicted, when this record completes the
// evidence of a drift, the event (also queued for the logs pipeline), and,
// once its version has drifted, the mark to check the record against.
func (t *driftTracker) observe(key lineageKey, version string, attrs pcommon.Map, at time.Time) (evicted int, event *driftEvent, mark driftMark) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, evicted := t.series(key, version, at)
	s.records++
	attrs.Range(func(k string, _ pcommon.Value) bool {
		if golden.IsOutcomeAttr(k) { // set by an upstream goldenfield, not by the service
			return true
		}
		if i, ok := s.index[k]; ok {
			s.counts[i]++
		} else if len(s.names) < t.cfg.MaxFields {
			k = strings.Clone(k) // do not pin the pdata buffer
			s.index[k] = len(s.names)
			s.names = append(s.names, k)
			s.counts = append(s.counts, 1)
		}
		return true
	})
	if s.reported {
		return evicted, nil, s.drifted
	}
	if s.prev == nil || s.prev.evicted || s.records%uint64(t.cfg.MinRecords) != 0 || s.prev.records < uint64(t.cfg.MinRecords) {
		return evicted, nil, driftMark{}
	}
	event = t.compare(s.prev, s, at)
	if event != nil {
		s.reported = true
		s.drifted.oldVersion = event.oldVersion
		for _, f := range event.lost {
			s.drifted.lost = append(s.drifted.lost, f.name)
		}
		if !t.firstReport(event) {
			return evicted, nil, s.drifted
		}
		if t.logsConsumers > 0 {
			if len(t.pending) == maxPendingDrift {
				t.pending = t.pending[1:]
			}
			t.pending = append(t.pending, *event)
		}
	}
	return evicted, event, s.drifted
}

// apply marks attrs with the lost fields it lacks.
func (m driftMark) apply(attrs pcommon.Map) {
	var lacks []string
	for _, f := range m.lost {
		if _, ok := attrs.Get(f); !ok {
			lacks = append(lacks, f)
		}
	}
	if len(lacks) == 0 {
		return
	}
	s := attrs.PutEmptySlice(golden.DriftFieldsLost)
	s.EnsureCapacity(len(lacks))
	for _, f := range lacks {
		s.AppendEmpty().SetStr(f)
	}
	attrs.PutStr(golden.DriftOldModelVer, m.oldVersion)
}

// series finds or creates the series of version in lineage key.
func (t *driftTracker) series(key lineageKey, version string, at time.Time) (*series, int) {
	ln := t.lineages[key]
	if ln == nil {
		key = lineageKey{strings.Clone(key.signal), strings.Clone(key.service), strings.Clone(key.stage), strings.Clone(key.family)}
		ln = &lineage{key: key}
		t.lineages[key] = ln
	}
	for _, s := range ln.versions {
		if s.version == version {
			t.lru.MoveToFront(s.elem)
			return s, 0
		}
	}
	s := &series{lineage: ln, version: strings.Clone(version), firstSeen: at, index: map[string]int{}}
	if n := len(ln.versions); n > 0 {
		s.prev = ln.versions[n-1]
	}
	ln.versions = append(ln.versions, s)
	s.elem = t.lru.PushFront(s)
	evicted := 0
	for t.lru.Len() > t.cfg.MaxSeries {
		t.evict(t.lru.Back().Value.(*series))
		evicted++
	}
	return s, evicted
}

func (t *driftTracker) evict(s *series) {
	t.lru.Remove(s.elem)
	ln := s.lineage
	ln.versions = slices.DeleteFunc(ln.versions, func(v *series) bool { return v == s })
	if len(ln.versions) == 0 {
		delete(t.lineages, ln.key)
	}
	// Keep only the flag: a later version may still point here as its prev.
	*s = series{evicted: true}
}

// compare reports the fields old nearly always carried and cur has dropped,
// and, alongside, those cur has gained; nil when none were lost.
func (t *driftTracker) compare(old, cur *series, at time.Time) *driftEvent {
	var lost, gained []fieldRate
	for _, name := range old.names {
		if r := old.rate(name); r >= t.cfg.PresentRate {
			if n := cur.rate(name); n <= t.cfg.AbsentRate {
				lost = append(lost, fieldRate{name, r, n})
			}
		}
	}
	if len(lost) == 0 {
		return nil
	}
	for _, name := range cur.names {
		if n := cur.rate(name); n >= t.cfg.PresentRate {
			if r := old.rate(name); r <= t.cfg.AbsentRate {
				gained = append(gained, fieldRate{name, r, n})
			}
		}
	}
	byName := func(a, b fieldRate) int { return strings.Compare(a.name, b.name) }
	slices.SortFunc(lost, byName)
	slices.SortFunc(gained, byName)
	return &driftEvent{
		key: cur.lineage.key, oldVersion: old.version, newVersion: cur.version,
		lost: lost, gained: gained, oldRecords: old.records, newRecords: cur.records,
		firstSeen: cur.firstSeen, detected: at,
	}
}

// drain returns the events waiting for a logs pipeline.
func (t *driftTracker) drain() []driftEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.pending
	t.pending = nil
	return out
}

// appendTo adds the event to ld as one schema.drift log record, under a
// resource naming the drifting service.
func (e *driftEvent) appendTo(ld plog.Logs, now time.Time) {
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", e.key.service)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(metadata.ScopeName)
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(e.detected))
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(now))
	lr.SetEventName(golden.SchemaDriftEvent)
	lr.SetSeverityNumber(plog.SeverityNumberWarn)
	lr.SetSeverityText("WARN")
	lr.Body().SetStr(e.summary())

	a := lr.Attributes()
	a.PutStr("event.name", golden.SchemaDriftEvent)
	a.PutStr("service.name", e.key.service)
	a.PutStr(golden.Stage, e.key.stage)
	a.PutStr(golden.ModelVer, e.newVersion)
	a.PutStr(golden.DriftSignal, e.key.signal)
	a.PutStr(golden.DriftOldModelVer, e.oldVersion)
	a.PutStr(golden.DriftNewModelVer, e.newVersion)
	a.PutStr(golden.DriftFirstSeen, e.firstSeen.UTC().Format(time.RFC3339Nano))
	a.PutInt(golden.DriftOldRecords, int64(e.oldRecords))
	a.PutInt(golden.DriftNewRecords, int64(e.newRecords))
	rates := a.PutEmptyMap(golden.DriftRates)
	for name, fields := range map[string][]fieldRate{golden.DriftFieldsLost: e.lost, golden.DriftFieldsGained: e.gained} {
		names := a.PutEmptySlice(name)
		for _, f := range fields {
			names.AppendEmpty().SetStr(f.name)
			r := rates.PutEmptyMap(f.name)
			r.PutDouble("old", f.old)
			r.PutDouble("new", f.new)
		}
	}
}

func (e *driftEvent) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schema drift in %s %s: model_ver %s -> %s lost", e.key.service, e.key.stage, e.oldVersion, e.newVersion)
	for _, f := range e.lost {
		fmt.Fprintf(&b, " %s (%.0f%% -> %.0f%%)", f.name, 100*f.old, 100*f.new)
	}
	if len(e.gained) > 0 {
		b.WriteString("; gained")
		for _, f := range e.gained {
			fmt.Fprintf(&b, " %s (%.0f%% -> %.0f%%)", f.name, 100*f.old, 100*f.new)
		}
	}
	return b.String()
}
