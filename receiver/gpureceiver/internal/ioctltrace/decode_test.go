//go:build linux && amd64

package ioctltrace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestEscapeAndStatusNames(t *testing.T) {
	assert.Equal(t, "NV_ESC_RM_ALLOC", EscapeName(KindRM, 0x2B))
	assert.Equal(t, "NV_ESC_IOCTL_XFER_CMD", EscapeName(KindRM, 211))
	assert.Equal(t, "NV_ESC_0x99", EscapeName(KindRM, 0x99))
	assert.Equal(t, "UVM_INITIALIZE", EscapeName(KindUVM, 0x30000001))
	assert.Equal(t, "UVM_TOOLS_58", EscapeName(KindUVM, 58))
	assert.Equal(t, "UVM_0x99", EscapeName(KindUVM, 0x99))
	assert.Equal(t, "NV_ERR_NO_MEMORY", StatusName(0x51))
	assert.Equal(t, "NV_STATUS_0x1234", StatusName(0x1234))
}

func TestOutcome(t *testing.T) {
	noMemory := outcomeOf(0x51, 0)
	assert.True(t, noMemory.Failed())
	assert.Equal(t, "NV_ERR_NO_MEMORY", noMemory.StatusName())
	assert.Equal(t, "none", noMemory.ErrnoName())

	ok := outcomeOf(0, 0)
	assert.False(t, ok.Failed())

	unknown := outcomeOf(statusNone, 0)
	assert.False(t, unknown.Failed())
	assert.Equal(t, "unknown", unknown.StatusName())

	einval := outcomeOf(statusNone, -int32(unix.EINVAL))
	assert.True(t, einval.Failed())
	assert.Equal(t, "EINVAL", einval.ErrnoName())
}

func TestStatusLayoutsFollowTheDriverVersion(t *testing.T) {
	offsetOf := func(version string, nr, size uint32) (uint32, bool) {
		v, err := ParseDriverVersion(version)
		require.NoError(t, err)
		for _, o := range offsetsFor(v) {
			if o.kind == KindRM && o.nr == nr && o.size == size {
				return o.offset, true
			}
		}
		return 0, false
	}
	for _, tc := range []struct {
		version  string
		nr, size uint32
		offset   uint32
	}{
		{"595.45.04", 0x2B, 32, 28}, // NVOS21
		{"535.104.05", 0x2B, 32, 28},
		{"530.30.02", 0x2B, 32, 24},
		{"595.45.04", 0x2B, 48, 40}, // NVOS64
		{"525.60.13", 0x2B, 40, 36},
		{"515.65.01", 0x2B, 40, 32},
		{"470.82.01", 0x2A, 32, 28}, // NVOS54
	} {
		off, ok := offsetOf(tc.version, tc.nr, tc.size)
		assert.True(t, ok, "%+v", tc)
		assert.Equal(t, tc.offset, off, "%+v", tc)
	}
	_, ok := offsetOf("595.45.04", 0x2B, 40)
	assert.False(t, ok, "the 40-byte NVOS64 is gone since 535")
}

// TestUVMLayoutsMatchTheDriversProbed: the uvm status offsets a driver
// showed test/gpu/uvm_status_offsets.py (testdata/uvm-status-offsets-*.txt,
// one file per driver probed) are the table's for that version, every
// command probed has one under the tracer's name for it, and every layout
// of the table was probed (but UVM_INITIALIZE's: on an uninitialized fd the
// probe would initialize it).
func TestUVMLayoutsMatchTheDriversProbed(t *testing.T) {
	const uvmInitialize = 0x30000001
	files, err := filepath.Glob("testdata/uvm-status-offsets-*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		var table map[uint32]uint32
		probed := map[uint32]bool{}
		for line := range strings.Lines(string(data)) {
			fields := strings.Fields(line)
			switch {
			case len(fields) == 0 || strings.HasPrefix(fields[0], "#"):
			case fields[0] == "driver:":
				v, err := ParseDriverVersion(fields[1])
				require.NoError(t, err, file)
				table = map[uint32]uint32{}
				for _, o := range offsetsFor(v) {
					if o.kind == KindUVM {
						table[o.nr] = o.offset
					}
				}
			case len(fields) == 4 && fields[2] != "-":
				require.NotNil(t, table, "%s: no driver line before %q", file, line)
				nr, err1 := strconv.ParseUint(fields[0], 10, 32)
				offset, err2 := strconv.ParseUint(fields[2], 10, 32)
				require.NoError(t, errors.Join(err1, err2), "%s: %q", file, line)
				assert.Equal(t, uint32(offset), table[uint32(nr)], "%s: %s", file, fields[1])
				assert.Equal(t, EscapeName(KindUVM, uint32(nr)), fields[1], "%s: the probe's name for %d", file, nr)
				probed[uint32(nr)] = true
			}
		}
		assert.NotEmpty(t, probed, file)
		for nr := range table {
			assert.True(t, probed[nr] || nr == uvmInitialize, "%s: the layout of %s was not probed", file, EscapeName(KindUVM, nr))
		}
	}
}

func TestParseDriverVersion(t *testing.T) {
	v, err := ParseDriverVersion("595.45.04\n")
	require.NoError(t, err)
	assert.Equal(t, DriverVersion{595, 45}, v)
	for _, bad := range []string{"", "595", "latest", "-1.2", "a.b"} {
		_, err := ParseDriverVersion(bad)
		assert.Error(t, err, bad)
	}
}

const procDevices = `Character devices:
  1 mem
195 nvidia-frontend
195 nvidia
234 nvidia-uvm
254 nvidia-caps

Block devices:
  8 sd
235 nvidia-uvm
`

func TestResolveDevices(t *testing.T) {
	nvidia, unregistered := uint32(195), uint32(7)
	filters, missing, err := resolve([]DeviceMatch{
		{Major: &nvidia},
		{ProcDevicesName: "nvidia-uvm", Kind: KindUVM},
		{ProcDevicesName: "nvidia-modeset"},
		{Path: "/dev/null"},
		{Major: &unregistered},
		{Path: "/dev/no-such-device"},
	}, strings.NewReader(procDevices))
	require.NoError(t, err)
	assert.Equal(t, []deviceFilter{
		{kernelDev(195, anyMinor), KindRM},
		{kernelDev(234, anyMinor), KindUVM}, // the character device, not the block one
		{kernelDev(1, 3), KindRM},
	}, filters)
	assert.Equal(t, []string{"nvidia-modeset", "major 7", "/dev/no-such-device"}, missing)

	// No GPU driver: NVIDIA's major is fixed, but nothing is registered under it.
	filters, missing, err = resolve([]DeviceMatch{{Major: &nvidia}, {Path: "/dev/null"}}, strings.NewReader("Character devices:\n  4 tty\n"))
	require.NoError(t, err)
	assert.Empty(t, filters)
	assert.Equal(t, []string{"major 195", "/dev/null"}, missing, "a device node whose driver is not registered is not traced")

	_, _, err = resolve([]DeviceMatch{{Path: "/etc/hostname"}}, strings.NewReader(""))
	assert.ErrorContains(t, err, "not a character device")
}

func TestDecodeEventRejectsPartialRecords(t *testing.T) {
	assert.True(t, decodeEvent(make([]byte, eventSize-1), clock{}, newContainerCache(0, nil)).Malformed)
	assert.True(t, decodeEvent(make([]byte, eventSize+1), clock{}, newContainerCache(0, nil)).Malformed)
	e := decodeEvent(make([]byte, eventSize), clock{}, newContainerCache(0, nil))
	assert.False(t, e.Malformed)
	assert.Equal(t, "NV_ESC_0x00", e.Escape)
}

// eventSize is the BPF program's struct event.
const eventSize = 360

func TestContainerOf(t *testing.T) {
	const id = "4f1c6e0b9a7d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f"
	for _, tc := range []struct{ cgroup, parent, container, pod string }{
		{"cri-containerd-" + id + ".scope", "kubepods-burstable-pod7e1f2a3b_4c5d_6e7f_8a9b_0c1d2e3f4a5b.slice", id, "7e1f2a3b-4c5d-6e7f-8a9b-0c1d2e3f4a5b"},
		{id, "pod7e1f2a3b-4c5d-6e7f-8a9b-0c1d2e3f4a5b", id, "7e1f2a3b-4c5d-6e7f-8a9b-0c1d2e3f4a5b"},
		{"docker-" + id + ".scope", "system.slice", id, ""},
		{"crio-conmon-" + id + ".scope", "kubepods.slice", "", ""},
		{"session-1.scope", "user-0.slice", "", ""},
		{"", "", "", ""},
	} {
		container, pod := containerOf(tc.cgroup, tc.parent)
		assert.Equal(t, tc.container, container, tc.cgroup)
		assert.Equal(t, tc.pod, pod, tc.parent)
	}
}

// TestContainerCacheKeepsTwoGenerations: events without names (the BPF
// program sent them with an earlier event of the thread) are resolved from
// the current or the last generation; a full generation starts a new names
// epoch, unless the BPF program could not be told.
func TestContainerCacheKeepsTwoGenerations(t *testing.T) {
	const id = "4f1c6e0b9a7d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f"
	name := func(s string) []int8 {
		b := make([]int8, 128)
		for i, c := range []byte(s) {
			b[i] = int8(c)
		}
		return b
	}
	var epochs int
	var epochErr error
	c := newContainerCache(0, func() error {
		if epochErr == nil {
			epochs++
		}
		return epochErr
	})
	c.generation = 2
	container := name("docker-" + id + ".scope")
	other := name("session-1.scope")

	assert.Equal(t, id, c.of(1, true, container, nil).id)
	assert.Equal(t, id, c.of(1, false, nil, nil).id, "the names came with an earlier event")
	c.of(2, true, other, nil)
	assert.Zero(t, epochs)
	c.of(3, true, other, nil)
	assert.Equal(t, 1, epochs, "the third cgroup starts a new generation")
	assert.Equal(t, id, c.of(1, false, nil, nil).id, "sent in the last epoch")
	c.of(4, true, other, nil)
	c.of(5, true, other, nil)
	assert.Equal(t, 2, epochs)
	assert.Empty(t, c.of(1, false, nil, nil).id, "two epochs ago: forgotten")

	epochErr = errors.New("map update failed")
	c.of(6, true, other, nil)
	c.of(7, true, other, nil)
	assert.Len(t, c.current, 3, "no new epoch: the generation grows")
	assert.Equal(t, 2, epochs)
}

func FuzzContainerOf(f *testing.F) {
	f.Add("docker-4f1c6e0b9a7d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f.scope", "pod7e1f2a3b_4c5d_6e7f_8a9b_0c1d2e3f4a5b.slice")
	f.Fuzz(func(t *testing.T, cgroup, parent string) {
		container, pod := containerOf(cgroup, parent)
		if container != "" && len(container) != 64 || pod != "" && len(pod) != 36 {
			t.Fatalf("%q %q → %q %q", cgroup, parent, container, pod)
		}
	})
}

func FuzzCharDrivers(f *testing.F) {
	f.Add(procDevices)
	f.Add("Character devices:\n  x y z\n99999999999 big\n")
	f.Fuzz(func(t *testing.T, text string) {
		d, err := charDrivers(strings.NewReader(text))
		if err != nil {
			return
		}
		for name, major := range d.byName {
			if strings.ContainsAny(name, " \t\n") || !d.registered(major) {
				t.Fatalf("bad entry %q=%d", name, major)
			}
		}
	})
}

func FuzzParseDriverVersion(f *testing.F) {
	for _, s := range []string{"595.45.04", "535.104", "", "1.2.3.4", "9999999999999999999.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseDriverVersion(s)
		if err == nil && v.Major <= 0 {
			t.Fatalf("%q parsed to %v", s, v)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(make([]byte, eventSize))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, sample []byte) {
		e := decodeEvent(sample, clock{}, newContainerCache(0, nil))
		if !e.Malformed && len(sample) != eventSize {
			t.Fatalf("decoded %d bytes", len(sample))
		}
	})
}

func TestDeviceMapsOf(t *testing.T) {
	d := deviceMapsOf([]deviceFilter{
		{kernelDev(195, anyMinor), KindRM},
		{kernelDev(1, anyMinor), KindRM},
		{kernelDev(1, 3), KindUVM},
		{kernelDev(10, 200), KindRM},
	})
	assert.Equal(t, map[uint32]uint8{195: 1, 1: kindByMinor, 10: kindByMinor}, d.majors,
		"a major with single devices is looked up by minor")
	assert.Equal(t, map[uint32]uint8{
		kernelDev(1, 3):        2,
		kernelDev(1, anyMinor): 1, // the rest of major 1
		kernelDev(10, 200):     1,
	}, d.minors, "a whole major needs no minor entry unless it also has single devices")
}

// TestLayoutTableHoldsEveryLayout: the BPF program finds each layout the
// Go table knows for every driver version, in a slot of its own.
func TestLayoutTableHoldsEveryLayout(t *testing.T) {
	for major := 510; major <= 600; major += 5 {
		offsets := offsetsFor(DriverVersion{Major: major})
		table, err := layoutTable(offsets)
		require.NoError(t, err, "driver %d", major)
		for _, o := range offsets {
			slot, ok := layoutSlot(o.kind, o.nr)
			require.True(t, ok)
			l := table[slot]
			i := slices.Index(l.Size[:], o.size)
			require.GreaterOrEqual(t, i, 0, "driver %d: %s size %d", major, EscapeName(o.kind, o.nr), o.size)
			assert.Equal(t, o.offset, l.Offset[i])
		}
	}
	slots := map[uint32]string{}
	for kind, escapes := range map[Kind]map[uint32]string{KindRM: rmEscapes, KindUVM: uvmEscapes} {
		for nr, name := range escapes {
			slot, ok := layoutSlot(kind, nr)
			require.True(t, ok, name)
			require.Less(t, slot, uint32(512), name)
			require.NotContains(t, slots, slot, "%s and %s share a slot", name, slots[slot])
			slots[slot] = name
		}
	}
	_, ok := layoutSlot(KindUVM, 0x40000000)
	assert.False(t, ok, "an unknown command far off has no slot (and no layout)")
}
