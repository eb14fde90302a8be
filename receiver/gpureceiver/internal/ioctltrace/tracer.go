//go:build linux && amd64

package ioctltrace // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Tracer traces ioctls on the configured devices until Close.
type Tracer struct {
	objs    tracerObjects
	links   []link.Link
	reader  *ringbuf.Reader
	attach  Attach
	opts    Options
	layouts Layouts
	devices deviceMaps
	traced  int      // device filters in the maps
	missing []string // configured devices not registered at the last look
	counts  *countTotals
	// namesEpoch is the BPF program's names_epoch, written by the reader.
	namesEpoch uint64
	wall       clock
	done       chan struct{}
	closeMu    sync.Once
}

// tracerObjects holds what both attach modes use; the programs of the mode
// not chosen are never loaded.
type tracerObjects struct {
	ioctlMaps
}

// attachModes are tried in order, each with the tracer's programs for its
// hook. fentry touches the ioctl syscall only. The syscall tracepoints run
// the program for ioctl only, but put every syscall of the host on the slow
// path (+80 ns per syscall here); the raw tracepoints run it for every
// syscall (+170 ns), and are the last resort, for hosts without tracefs.
// Per traced call they cost ~40 ns less.
var attachModes = []struct {
	mode        Attach
	enter, exit string
}{
	{AttachFentry, ioctlProgFentryIoctl, ioctlProgFexitIoctl},
	{AttachTracepoint, ioctlProgTpEnterIoctl, ioctlProgTpExitIoctl},
	{AttachRawTracepoint, ioctlProgRawEnter, ioctlProgRawExit},
}

// attachHook attaches a program to the ioctl syscall's entry or exit by
// the hook of mode.
func attachHook(mode Attach, p *ebpf.Program, enter bool) (link.Link, error) {
	switch mode {
	case AttachFentry:
		return link.AttachTracing(link.TracingOptions{Program: p})
	case AttachTracepoint:
		if enter {
			return link.Tracepoint("syscalls", "sys_enter_ioctl", p, nil)
		}
		return link.Tracepoint("syscalls", "sys_exit_ioctl", p, nil)
	case AttachRawTracepoint:
		return link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
	}
	return nil, fmt.Errorf("unknown attach mode %q", mode)
}

// defaultRingPollInterval bounds how long an event waits in the ring: the
// BPF program wakes the reader only once per quarter of the ring.
const defaultRingPollInterval = 100 * time.Millisecond

// ringEvents is how many events a ring of ringSize bytes holds (a record
// is the event and an 8-byte header).
func ringEvents(ringSize int) int { return ringSize / int(unsafe.Sizeof(ioctlEvent{})+8) }

// wakeupEvents is how many events the BPF program writes between two
// wakeups of the reader: a quarter of the ring.
func wakeupEvents(ringSize int) uint32 { return uint32(max(1, ringEvents(ringSize)/4)) }

// Start loads and attaches the BPF programs for the configured devices
// registered now and calls onEvent, from one goroutine, for every failed or
// slow call until Close. Without any it returns ErrNoDevices, having loaded
// nothing: a host without the driver pays nothing. Refresh follows devices
// that come and go.
func Start(opts Options, onEvent func(Event)) (*Tracer, error) {
	filters, missing, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	if len(filters) == 0 {
		return nil, NoDevicesError(missing)
	}
	layouts, err := opts.layouts()
	if err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, privilegeError(fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err))
	}
	spec, err := loadIoctl()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %w", err)
	}
	spec.Maps[ioctlMapEvents].MaxEntries = uint32(opts.RingBufferSize)
	if err := spec.Variables[ioctlVarWakeupEvents].Set(wakeupEvents(opts.RingBufferSize)); err != nil {
		return nil, fmt.Errorf("setting wakeup_events: %w", err)
	}
	cacheSlots := cmp.Or(opts.statCacheSlots, defaultStatCacheSlots)
	spec.Maps[ioctlMapStatCache].MaxEntries = uint32(cacheSlots)
	if err := spec.Variables[ioctlVarStatCacheMask].Set(uint32(cacheSlots - 1)); err != nil {
		return nil, fmt.Errorf("setting stat_cache_mask: %w", err)
	}
	if err := spec.Variables[ioctlVarSlowNs].Set(uint64(opts.SlowThreshold.Nanoseconds())); err != nil {
		return nil, fmt.Errorf("setting slow_ns: %w", err)
	}
	if err := spec.Variables[ioctlVarDirectFileReads].Set(!opts.probeReadFiles && haveRdonlyCast()); err != nil {
		return nil, fmt.Errorf("setting direct_file_reads: %w", err)
	}

	t := &Tracer{opts: opts, traced: len(filters), missing: missing, layouts: layouts, wall: newClock(), done: make(chan struct{}),
		counts: newCountTotals()}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, privilegeError(fmt.Errorf("loading the BPF maps: %w", err))
	}
	if err := t.fill(filters); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	if t.attach, err = t.attachPrograms(spec, opts.Attach); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	if t.reader, err = ringbuf.NewReader(t.objs.Events); err != nil {
		return nil, errors.Join(fmt.Errorf("opening the ring buffer: %w", err), t.Close())
	}
	go t.read(onEvent, opts.Logger)
	return t, nil
}

// Refresh looks at /proc/devices again and traces the configured devices
// registered now: drivers loaded since are traced, those unloaded are not.
// It returns the devices still traced (0: Close the tracer, and Start again
// when one appears) and the configured ones that are not registered.
func (t *Tracer) Refresh() (traced int, missing []string, err error) {
	filters, missing, err := t.opts.resolve()
	if err == nil {
		err = t.setDevices(filters)
	}
	if err != nil {
		return t.traced, t.missing, err
	}
	t.traced, t.missing = len(filters), missing
	return t.traced, t.missing, nil
}

// Missing names the configured devices that were not registered at the
// last look (Start or Refresh).
func (t *Tracer) Missing() []string { return t.missing }

// fill writes the device filters and the status layouts into their maps.
func (t *Tracer) fill(filters []deviceFilter) error {
	if err := t.setDevices(filters); err != nil {
		return err
	}
	layouts, err := layoutTable(offsetsFor(t.layouts.Version))
	if err != nil {
		return err
	}
	for slot, l := range layouts {
		if err := t.objs.StatusLayouts.Put(slot, l); err != nil {
			return fmt.Errorf("status layouts: %w", err)
		}
	}
	return nil
}

// setDevices makes filters the traced devices, in place of the last ones.
func (t *Tracer) setDevices(filters []deviceFilter) error {
	next := deviceMapsOf(filters)
	var errs []error
	for major := range t.devices.majors {
		if _, ok := next.majors[major]; !ok {
			errs = append(errs, t.objs.Majors.Put(major, uint8(0)))
		}
	}
	for dev := range t.devices.minors {
		if _, ok := next.minors[dev]; !ok {
			errs = append(errs, t.objs.Minors.Delete(dev))
		}
	}
	// Minors before majors: a major sends the lookup on to minors.
	for dev, kind := range next.minors {
		errs = append(errs, t.objs.Minors.Put(dev, kind))
	}
	for major, kind := range next.majors {
		errs = append(errs, t.objs.Majors.Put(major, kind))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("device filter: %w", err)
	}
	t.devices = next
	return nil
}

// kindByMinor in majors sends the lookup on to minors (the BPF program's
// KIND_BY_MINOR).
const kindByMinor = 3

// deviceMaps is the BPF program's view of the device filters: majors says
// how every minor of a major is decoded, or that its minors are traced one
// by one (kindByMinor); minors holds those, and the kind of every other
// minor of such a major as major:anyMinor when the whole major is traced.
type deviceMaps struct {
	majors map[uint32]uint8
	minors map[uint32]uint8
}

func deviceMapsOf(filters []deviceFilter) deviceMaps {
	d := deviceMaps{majors: map[uint32]uint8{}, minors: map[uint32]uint8{}}
	whole := map[uint32]uint8{}
	for _, f := range filters {
		major := f.dev >> 20
		if f.dev&anyMinor == anyMinor {
			whole[major] = kindCode(f.kind)
			continue
		}
		d.minors[f.dev] = kindCode(f.kind)
		d.majors[major] = kindByMinor
	}
	for major, kind := range whole {
		if d.majors[major] == kindByMinor {
			d.minors[kernelDev(major, anyMinor)] = kind
		} else {
			d.majors[major] = kind
		}
	}
	return d
}

// layoutSizes is the number of parameter sizes one slot of the BPF
// program's status_layouts holds.
const layoutSizes = 4

// layoutSlot is where the BPF program looks up a call's layouts (its
// layout_slot): rm escapes at 0-255, uvm commands below 0xf0 at 256 +
// command, UVM_INITIALIZE and UVM_DEINITIALIZE (0x3000000N) at 496 + N.
func layoutSlot(kind Kind, nr uint32) (uint32, bool) {
	switch {
	case kind == KindRM:
		return nr, nr < 256
	case nr < 0xf0:
		return 256 + nr, true
	case nr&^0xf == 0x30000000:
		return 496 + nr&0xf, true
	}
	return 0, false
}

// layoutTable groups status offsets by slot, as the BPF program reads them.
func layoutTable(offsets []statusOffset) (map[uint32]ioctlLayout, error) {
	table := map[uint32]ioctlLayout{}
	for _, o := range offsets {
		slot, ok := layoutSlot(o.kind, o.nr)
		if !ok {
			return nil, fmt.Errorf("status layout of %s has no slot in the BPF program", EscapeName(o.kind, o.nr))
		}
		if o.offset == 0 {
			return nil, fmt.Errorf("status layout of %s: offset 0 means no layout to the BPF program", EscapeName(o.kind, o.nr))
		}
		l := table[slot]
		i := slices.Index(l.Offset[:], 0)
		if i < 0 {
			return nil, fmt.Errorf("status layouts of %s: more than %d parameter sizes", EscapeName(o.kind, o.nr), layoutSizes)
		}
		l.Size[i], l.Offset[i] = o.size, o.offset
		table[slot] = l
	}
	return table, nil
}

// haveRdonlyCast reports whether the kernel has the bpf_rdonly_cast kfunc
// (Linux 6.2), with which the BPF program reads struct file by direct
// loads.
func haveRdonlyCast() bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false
	}
	var fn *btf.Func
	return spec.TypeByName("bpf_rdonly_cast", &fn) == nil
}

// attachPrograms attaches the first mode the kernel accepts, or the one
// asked for.
func (t *Tracer) attachPrograms(spec *ebpf.CollectionSpec, want Attach) (Attach, error) {
	var errs []error
	for _, m := range attachModes {
		if want != AttachAuto && want != m.mode {
			continue
		}
		links, err := linkPair(spec, m.mode, m.enter, m.exit, t.objs.replacements())
		if err == nil {
			t.links = links
			return m.mode, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m.mode, err))
	}
	err := errors.Join(errs...)
	if errors.Is(err, os.ErrNotExist) {
		err = fmt.Errorf("%w (is tracefs mounted? mount -t tracefs nodev /sys/kernel/tracing)", err)
	}
	return "", privilegeError(fmt.Errorf("attaching to the ioctl syscall: %w", err))
}

// linkPair loads the enter and exit programs of spec, with maps in place
// of spec's maps of the same names, and attaches them by the hook of mode.
// The programs of other hooks are never loaded.
func linkPair(spec *ebpf.CollectionSpec, mode Attach, enter, exit string, maps map[string]*ebpf.Map) ([]link.Link, error) {
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{
		Programs: map[string]*ebpf.ProgramSpec{enter: spec.Programs[enter], exit: spec.Programs[exit]},
		Maps:     spec.Maps, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder,
	}, ebpf.CollectionOptions{MapReplacements: maps})
	if err != nil {
		return nil, err
	}
	defer coll.Close()
	// Exit first, so that no call is entered and then missed at exit.
	var links []link.Link
	for _, name := range []string{exit, enter} {
		l, err := attachHook(mode, coll.Programs[name], name == enter)
		if err != nil {
			return nil, errors.Join(err, unlink(links))
		}
		links = append(links, l)
	}
	return links, nil
}

func (o *tracerObjects) replacements() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		ioctlMapCounters: o.Counters, ioctlMapEmitted: o.Emitted, ioctlMapEvents: o.Events, ioctlMapInflight: o.Inflight,
		ioctlMapMajors: o.Majors, ioctlMapMinors: o.Minors, ioctlMapNamesEpoch: o.NamesEpoch, ioctlMapReadEpoch: o.ReadEpoch,
		ioctlMapStatCache: o.StatCache, ioctlMapStats: o.Stats, ioctlMapStatusLayouts: o.StatusLayouts,
		ioctlMapZeroStat: o.ZeroStat,
	}
}

func (t *Tracer) read(onEvent func(Event), logger *zap.Logger) {
	defer close(t.done)
	var rec ringbuf.Record
	containers := newContainerCache(ringEvents(t.opts.RingBufferSize), t.newNamesEpoch)
	pollInterval := cmp.Or(t.opts.ringPollInterval, defaultRingPollInterval)
	t.reader.SetDeadline(time.Now().Add(pollInterval))
	for {
		if err := t.reader.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) {
				return
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.reader.SetDeadline(time.Now().Add(pollInterval))
				continue
			}
			if logger != nil {
				logger.Warn("Reading the ioctl ring buffer", zap.Error(err))
			}
			continue
		}
		onEvent(decodeEvent(rec.RawSample, t.wall, containers))
	}
}

// newNamesEpoch makes the BPF program send each thread's cgroup names
// again, with its next event.
func (t *Tracer) newNamesEpoch() error {
	t.namesEpoch++
	return t.objs.NamesEpoch.Put(uint32(0), t.namesEpoch)
}

// decodeEvent reads one ring buffer record; one that is not a whole event
// comes back marked Malformed. The record is the C struct's bytes in the
// host's order: copying them over the Go mirror is the whole decoding (a
// reflective decoder cost more than the BPF program per event).
func decodeEvent(sample []byte, wall clock, containers *containerCache) Event {
	var raw ioctlEvent
	if len(sample) != int(unsafe.Sizeof(raw)) {
		return Event{Malformed: true}
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&raw)), unsafe.Sizeof(raw)), sample)
	kind := kindOf(raw.Kind)
	c := containers.of(raw.CgroupId, raw.Named != 0, raw.Cgroup[:], raw.CgroupParent[:])
	return Event{
		Time:        wall.toTime(raw.StartNs),
		Latency:     time.Duration(raw.LatencyNs),
		PID:         raw.Tgid,
		TID:         raw.Tid,
		NSPID:       raw.NsTgid,
		NSTID:       raw.NsTid,
		CgroupID:    raw.CgroupId,
		ContainerID: c.id,
		PodUID:      c.pod,
		Comm:        cString(raw.Comm[:]),
		ProcessComm: cString(raw.ProcessComm[:]),
		DeviceMajor: raw.Dev >> 20,
		DeviceMinor: raw.Dev & anyMinor,
		Kind:        kind,
		Cmd:         raw.Cmd,
		Escape:      EscapeName(kind, raw.Nr),
		Size:        raw.Size,
		XFER:        raw.Xfer != 0,
		Outcome:     outcomeOf(raw.Status, raw.Err),
	}
}

// Lost returns the events dropped because the ring buffer was full and
// the calls not traced because too many were in flight.
func (t *Tracer) Lost() (dropped, untracked uint64, err error) {
	sum := func(idx uint32) (uint64, error) {
		var per []uint64
		if err := t.objs.Counters.Lookup(idx, &per); err != nil {
			return 0, err
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		return n, nil
	}
	if dropped, err = sum(0); err != nil {
		return 0, 0, err
	}
	untracked, err = sum(1)
	return dropped, untracked, err
}

// Attach says how the programs are attached.
func (t *Tracer) Attach() Attach { return t.attach }

// Layouts says whose parameter layouts are in use.
func (t *Tracer) Layouts() Layouts { return t.layouts }

// Close detaches the programs, stops the reader and waits for it.
func (t *Tracer) Close() error {
	var errs []error
	t.closeMu.Do(func() {
		errs = append(errs, t.unlink())
		if t.reader != nil {
			errs = append(errs, t.reader.Close())
			<-t.done
		}
		errs = append(errs, t.objs.Close())
	})
	return errors.Join(errs...)
}

func (t *Tracer) unlink() error {
	err := unlink(t.links)
	t.links = nil
	return err
}

func unlink(links []link.Link) error {
	var errs []error
	for _, l := range links {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

func kindCode(k Kind) uint8 {
	if k == KindUVM {
		return 2
	}
	return 1
}

func kindOf(code uint8) Kind {
	if code == 2 {
		return KindUVM
	}
	return KindRM
}

// privilegeError explains a permission failure in terms of what to grant.
func privilegeError(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: %w", ErrPrivileges, err)
	}
	return err
}

// clock turns the kernel's monotonic nanoseconds into wall time.
type clock struct{ offset time.Duration }

func newClock() clock {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return clock{offset: time.Duration(time.Now().UnixNano() - ts.Nano())}
}

func (c clock) toTime(monoNs uint64) time.Time { return time.Unix(0, int64(monoNs)+int64(c.offset)) }
