package ioctltrace // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"

import (
	"fmt"
	"strconv"
	"strings"
)

// Escape and status numbers come from NVIDIA's open-gpu-kernel-modules
// (nv_escape.h, nv-ioctl-numbers.h, uvm_ioctl.h, nvstatuscodes.h); see
// shared/notes/nvidia-driver.md.

// nvXferNr is NV_ESC_IOCTL_XFER_CMD: it wraps parameters too big for the
// ioctl size field; the BPF program unwraps it to the real escape.
const nvXferNr = 211

var rmEscapes = map[uint32]string{
	0x27:     "NV_ESC_RM_ALLOC_MEMORY",
	0x28:     "NV_ESC_RM_ALLOC_OBJECT",
	0x29:     "NV_ESC_RM_FREE",
	0x2A:     "NV_ESC_RM_CONTROL",
	0x2B:     "NV_ESC_RM_ALLOC",
	0x32:     "NV_ESC_RM_CONFIG_GET",
	0x33:     "NV_ESC_RM_CONFIG_SET",
	0x34:     "NV_ESC_RM_DUP_OBJECT",
	0x35:     "NV_ESC_RM_SHARE",
	0x37:     "NV_ESC_RM_CONFIG_GET_EX",
	0x38:     "NV_ESC_RM_CONFIG_SET_EX",
	0x39:     "NV_ESC_RM_I2C_ACCESS",
	0x41:     "NV_ESC_RM_IDLE_CHANNELS",
	0x4A:     "NV_ESC_RM_VID_HEAP_CONTROL",
	0x4D:     "NV_ESC_RM_ACCESS_REGISTRY",
	0x4E:     "NV_ESC_RM_MAP_MEMORY",
	0x4F:     "NV_ESC_RM_UNMAP_MEMORY",
	0x52:     "NV_ESC_RM_GET_EVENT_DATA",
	0x54:     "NV_ESC_RM_ALLOC_CONTEXT_DMA2",
	0x57:     "NV_ESC_RM_MAP_MEMORY_DMA",
	0x58:     "NV_ESC_RM_UNMAP_MEMORY_DMA",
	0x59:     "NV_ESC_RM_BIND_CONTEXT_DMA",
	0x5E:     "NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO",
	0x5F:     "NV_ESC_RM_LOCKLESS_DIAGNOSTIC",
	200:      "NV_ESC_CARD_INFO",
	201:      "NV_ESC_REGISTER_FD",
	206:      "NV_ESC_ALLOC_OS_EVENT",
	207:      "NV_ESC_FREE_OS_EVENT",
	209:      "NV_ESC_STATUS_CODE",
	210:      "NV_ESC_CHECK_VERSION_STR",
	nvXferNr: "NV_ESC_IOCTL_XFER_CMD",
	212:      "NV_ESC_ATTACH_GPUS_TO_FD",
	213:      "NV_ESC_QUERY_DEVICE_INTR",
	214:      "NV_ESC_SYS_PARAMS",
	215:      "NV_ESC_NUMA_INFO",
	216:      "NV_ESC_SET_NUMA_STATUS",
	217:      "NV_ESC_EXPORT_TO_DMABUF_FD",
	218:      "NV_ESC_WAIT_OPEN_COMPLETE",
}

var uvmEscapes = map[uint32]string{
	0x30000001: "UVM_INITIALIZE",
	0x30000002: "UVM_DEINITIALIZE",
	1:          "UVM_RESERVE_VA",
	2:          "UVM_RELEASE_VA",
	23:         "UVM_CREATE_RANGE_GROUP",
	24:         "UVM_DESTROY_RANGE_GROUP",
	25:         "UVM_REGISTER_GPU_VASPACE",
	26:         "UVM_UNREGISTER_GPU_VASPACE",
	27:         "UVM_REGISTER_CHANNEL",
	28:         "UVM_UNREGISTER_CHANNEL",
	29:         "UVM_ENABLE_PEER_ACCESS",
	33:         "UVM_MAP_EXTERNAL_ALLOCATION",
	34:         "UVM_FREE",
	35:         "UVM_MEM_MAP",
	37:         "UVM_REGISTER_GPU",
	38:         "UVM_UNREGISTER_GPU",
	39:         "UVM_PAGEABLE_MEM_ACCESS",
	42:         "UVM_SET_PREFERRED_LOCATION",
	46:         "UVM_SET_ACCESSED_BY",
	51:         "UVM_MIGRATE",
	65:         "UVM_MAP_DYNAMIC_PARALLELISM_REGION",
	66:         "UVM_UNMAP_EXTERNAL",
	68:         "UVM_ALLOC_SEMAPHORE_POOL",
	71:         "UVM_POPULATE_PAGEABLE",
	72:         "UVM_VALIDATE_VA_RANGE",
	73:         "UVM_CREATE_EXTERNAL_RANGE",
	75:         "UVM_MM_INITIALIZE",
	80:         "UVM_DISCARD",
}

// EscapeName names a call: the escape for rm devices (by _IOC_NR), the
// command for uvm devices; unknown ones by number.
func EscapeName(kind Kind, nr uint32) string {
	if kind == KindUVM {
		if name, ok := uvmEscapes[nr]; ok {
			return name
		}
		if nr >= 56 && nr <= 64 {
			return "UVM_TOOLS_" + strconv.Itoa(int(nr))
		}
		return fmt.Sprintf("UVM_0x%X", nr)
	}
	if name, ok := rmEscapes[nr]; ok {
		return name
	}
	return fmt.Sprintf("NV_ESC_0x%02X", nr)
}

var statusNames = map[uint32]string{
	0x00:   "NV_OK",
	0x0B:   "NV_ERR_ECC_ERROR",
	0x0F:   "NV_ERR_GPU_IS_LOST",
	0x17:   "NV_ERR_IN_USE",
	0x1A:   "NV_ERR_INSUFFICIENT_RESOURCES",
	0x1B:   "NV_ERR_INSUFFICIENT_PERMISSIONS",
	0x1F:   "NV_ERR_INVALID_ARGUMENT",
	0x33:   "NV_ERR_INVALID_OBJECT_HANDLE",
	0x40:   "NV_ERR_INVALID_STATE",
	0x51:   "NV_ERR_NO_MEMORY",
	0x56:   "NV_ERR_NOT_SUPPORTED",
	0x62:   "NV_ERR_RESET_REQUIRED",
	0x65:   "NV_ERR_TIMEOUT",
	0xFFFF: "NV_ERR_GENERIC",
}

// StatusName names an NV_STATUS code; unknown codes by number.
func StatusName(status uint32) string {
	if name, ok := statusNames[status]; ok {
		return name
	}
	return fmt.Sprintf("NV_STATUS_0x%X", status)
}

// DriverVersion is the NVIDIA driver's major.minor, e.g. 595.45.
type DriverVersion struct{ Major, Minor int }

// ParseDriverVersion reads "595.45.04" or "535.104".
func ParseDriverVersion(s string) (DriverVersion, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) < 2 {
		return DriverVersion{}, fmt.Errorf("%q is not a driver version like 595.45.04", s)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || major <= 0 {
		return DriverVersion{}, fmt.Errorf("%q is not a driver version like 595.45.04", s)
	}
	return DriverVersion{major, minor}, nil
}

func (v DriverVersion) String() string { return fmt.Sprintf("%d.%02d", v.Major, v.Minor) }

// statusOffset is where a call's status sits in its parameters.
type statusOffset struct {
	kind       Kind
	nr, size   uint32
	offset     uint32
	minVersion int // driver major version the layout starts at; 0: all
	maxVersion int // first driver major version without it; 0: none
}

// statusOffsets are the layouts known per (escape, parameter size) and
// driver version; a call with no entry is counted with status unknown.
var statusOffsets = []statusOffset{
	{KindRM, 0x29, 16, 12, 0, 0},      // NVOS00 (FREE)
	{KindRM, 0x27, 56, 40, 0, 0},      // NVOS02 with fd (ALLOC_MEMORY)
	{KindRM, 0x2B, 32, 28, 535, 0},    // NVOS21 (ALLOC)
	{KindRM, 0x2B, 32, 24, 0, 535},    // NVOS21 before 535
	{KindRM, 0x2B, 48, 40, 535, 0},    // NVOS64 (ALLOC)
	{KindRM, 0x2B, 40, 32, 0, 525},    // NVOS64 in 515
	{KindRM, 0x2B, 40, 36, 525, 535},  // NVOS64 in 525
	{KindRM, 0x2A, 32, 28, 0, 0},      // NVOS54 (CONTROL)
	{KindRM, 0x4E, 56, 40, 0, 0},      // NVOS33 with fd (MAP_MEMORY)
	{KindRM, 0x4F, 32, 24, 0, 0},      // NVOS34 (UNMAP_MEMORY)
	{KindRM, 0x4A, 184, 20, 0, 0},     // NVOS32 (VID_HEAP_CONTROL)
	{KindUVM, 0x30000001, 0, 8, 0, 0}, // UVM_INITIALIZE
	{KindUVM, 37, 0, 36, 0, 0},        // UVM_REGISTER_GPU
	{KindUVM, 38, 0, 16, 0, 0},        // UVM_UNREGISTER_GPU
	{KindUVM, 25, 0, 28, 0, 0},        // UVM_REGISTER_GPU_VASPACE
	{KindUVM, 26, 0, 16, 0, 0},        // UVM_UNREGISTER_GPU_VASPACE
	{KindUVM, 23, 0, 8, 0, 0},         // UVM_CREATE_RANGE_GROUP
	{KindUVM, 24, 0, 8, 0, 0},         // UVM_DESTROY_RANGE_GROUP
	// UVM_FREE's parameters are base, length, status: an H200 on driver
	// 580.159 left each freed range's length at offset 8.
	{KindUVM, 34, 0, 16, 0, 0},
	{KindUVM, 27, 0, 48, 0, 0}, // UVM_REGISTER_CHANNEL
	{KindUVM, 28, 0, 24, 0, 0}, // UVM_UNREGISTER_CHANNEL
	// Their per-GPU arrays hold UVM_MAX_GPUS entries: 32 before 570, 256 since.
	{KindUVM, 33, 0, 1196, 0, 570}, // UVM_MAP_EXTERNAL_ALLOCATION
	{KindUVM, 33, 0, 9260, 570, 0},
	{KindUVM, 68, 0, 1176, 0, 570}, // UVM_ALLOC_SEMAPHORE_POOL
	{KindUVM, 68, 0, 9240, 570, 0},
	{KindUVM, 51, 0, 72, 0, 0}, // UVM_MIGRATE
	{KindUVM, 39, 0, 4, 0, 0},  // UVM_PAGEABLE_MEM_ACCESS
	{KindUVM, 65, 0, 32, 0, 0}, // UVM_MAP_DYNAMIC_PARALLELISM_REGION
	{KindUVM, 66, 0, 32, 0, 0}, // UVM_UNMAP_EXTERNAL
	{KindUVM, 72, 0, 16, 0, 0}, // UVM_VALIDATE_VA_RANGE
	{KindUVM, 73, 0, 16, 0, 0}, // UVM_CREATE_EXTERNAL_RANGE
	{KindUVM, 75, 0, 4, 0, 0},  // UVM_MM_INITIALIZE
}

// offsetsFor returns the layouts that hold for a driver version.
func offsetsFor(v DriverVersion) []statusOffset {
	var out []statusOffset
	for _, o := range statusOffsets {
		if (o.minVersion == 0 || v.Major >= o.minVersion) && (o.maxVersion == 0 || v.Major < o.maxVersion) {
			out = append(out, o)
		}
	}
	return out
}
