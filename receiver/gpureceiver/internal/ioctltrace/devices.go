package ioctltrace // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Kind says how a device's ioctl commands are decoded.
type Kind string

const (
	// KindRM is nvidia.ko's resource manager interface (/dev/nvidiactl,
	// /dev/nvidiaN): _IOWR('F', nr, size) commands, NV_STATUS in the params.
	KindRM Kind = "rm"
	// KindUVM is nvidia-uvm.ko (/dev/nvidia-uvm): plain integer commands,
	// rmStatus at the end of the params.
	KindUVM Kind = "uvm"
)

// NVIDIAMajor is the character major of /dev/nvidiactl and /dev/nvidiaN.
const NVIDIAMajor = 195

// DeviceMatch selects device files whose ioctls are traced: every device
// of a major number (given, or looked up by name in /proc/devices), or the
// one device behind a path.
type DeviceMatch struct {
	Major *uint32 `mapstructure:"major"`
	// ProcDevicesName is a character driver's name in /proc/devices, for
	// drivers with a dynamic major such as nvidia-uvm.
	ProcDevicesName string `mapstructure:"proc_devices_name"`
	// Path is a device file; only its major:minor is traced.
	Path string `mapstructure:"path"`
	// Kind is how commands are decoded: rm (default) or uvm.
	Kind Kind `mapstructure:"kind"`
}

// Validate checks that exactly one selector is set and the kind is known.
func (m DeviceMatch) Validate() error {
	set := 0
	for _, ok := range []bool{m.Major != nil, m.ProcDevicesName != "", m.Path != ""} {
		if ok {
			set++
		}
	}
	var errs []error
	if set != 1 {
		errs = append(errs, errors.New("set exactly one of major, proc_devices_name or path, e.g. {major: 195} or {proc_devices_name: nvidia-uvm, kind: uvm}"))
	}
	if m.Major != nil && *m.Major >= 1<<12 {
		errs = append(errs, fmt.Errorf("major: %d is not a Linux major number (0 to 4095)", *m.Major))
	}
	switch m.Kind {
	case "", KindRM, KindUVM:
	default:
		errs = append(errs, fmt.Errorf("kind: %q is not rm or uvm", m.Kind))
	}
	return errors.Join(errs...)
}

func (m DeviceMatch) kind() Kind {
	if m.Kind == "" {
		return KindRM
	}
	return m.Kind
}

// anyMinor in a resolved filter stands for every minor of the major.
const anyMinor = 1<<20 - 1

// deviceFilter is one resolved match: a kernel dev_t (major<<20 | minor,
// the in-kernel encoding the BPF program reads from the inode) and a kind.
type deviceFilter struct {
	dev  uint32
	kind Kind
}

func kernelDev(major, minor uint32) uint32 { return major<<20 | minor }

// resolve turns matches into filters for the devices registered now: a
// major when a character driver is registered under it in /proc/devices
// (NVIDIA's 195 is fixed, but has no driver on a host without the GPU
// driver), a proc_devices_name when that driver is registered, a path when
// the file is a character device of a registered major (a device node can
// outlive its driver). What is not registered is named in missing ("major
// 195", "nvidia-uvm", "/dev/nvidia0"), so that the tracer runs for the
// rest, and the caller can look again later.
func resolve(matches []DeviceMatch, procDevices io.Reader) (filters []deviceFilter, missing []string, err error) {
	drivers, err := charDrivers(procDevices)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range matches {
		switch {
		case m.Major != nil:
			if !drivers.registered(*m.Major) {
				missing = append(missing, fmt.Sprintf("major %d", *m.Major))
				continue
			}
			filters = append(filters, deviceFilter{kernelDev(*m.Major, anyMinor), m.kind()})
		case m.ProcDevicesName != "":
			major, ok := drivers.byName[m.ProcDevicesName]
			if !ok {
				missing = append(missing, m.ProcDevicesName)
				continue
			}
			filters = append(filters, deviceFilter{kernelDev(major, anyMinor), m.kind()})
		default:
			var st unix.Stat_t
			if err := unix.Stat(m.Path, &st); err != nil {
				if errors.Is(err, unix.ENOENT) {
					missing = append(missing, m.Path)
					continue
				}
				return nil, nil, fmt.Errorf("device %s: %w", m.Path, err)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFCHR {
				return nil, nil, fmt.Errorf("device %s: not a character device", m.Path)
			}
			if !drivers.registered(unix.Major(st.Rdev)) {
				missing = append(missing, m.Path)
				continue
			}
			filters = append(filters, deviceFilter{kernelDev(unix.Major(st.Rdev), unix.Minor(st.Rdev)), m.kind()})
		}
	}
	return filters, missing, nil
}

// drivers are the character drivers in /proc/devices.
type drivers struct {
	byName map[string]uint32
	majors map[uint32]bool
}

func (d drivers) registered(major uint32) bool { return d.majors[major] }

// charDrivers reads the character device section of /proc/devices.
func charDrivers(r io.Reader) (drivers, error) {
	d := drivers{byName: map[string]uint32{}, majors: map[uint32]bool{}}
	sc := bufio.NewScanner(r)
	inChar := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "Character devices:":
			inChar = true
			continue
		case "Block devices:":
			inChar = false
			continue
		}
		fields := strings.Fields(line)
		if !inChar || len(fields) != 2 {
			continue
		}
		if major, err := strconv.ParseUint(fields[0], 10, 32); err == nil {
			d.byName[fields[1]] = uint32(major)
			d.majors[uint32(major)] = true
		}
	}
	if err := sc.Err(); err != nil {
		return drivers{}, fmt.Errorf("reading /proc/devices: %w", err)
	}
	return d, nil
}

// openProcDevices opens the kernel's /proc/devices.
func openProcDevices() (io.ReadCloser, error) { return os.Open("/proc/devices") }
