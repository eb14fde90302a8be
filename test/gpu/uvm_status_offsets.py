#!/usr/bin/env python3
"""Where this driver's nvidia-uvm writes each command's rmStatus (part of
`make gpu-check`; root or access to /dev/nvidia-uvm).

For each command the ioctl tracer has a layout for, a 16 KiB buffer filled
with 0xAB is passed to it on a fresh, uninitialized fd: the driver copies
its parameters in, sets rmStatus (an error, since the fd is not initialized
or the bytes are refused) and copies them back, so the one 4-byte word that
changed is rmStatus. Nothing is allocated or mapped.

Prints "driver: VERSION", then "NR NAME OFFSET STATUS" per command (OFFSET
"-" when the driver refused the command itself, e.g. ENOSYS). The ioctl
tracer's tests compare such a file, kept per driver in
receiver/gpureceiver/internal/ioctltrace/testdata/, with its layouts.
"""
import ctypes
import os
import sys

COMMANDS = {
    23: "UVM_CREATE_RANGE_GROUP", 24: "UVM_DESTROY_RANGE_GROUP", 25: "UVM_REGISTER_GPU_VASPACE",
    26: "UVM_UNREGISTER_GPU_VASPACE", 27: "UVM_REGISTER_CHANNEL", 28: "UVM_UNREGISTER_CHANNEL",
    33: "UVM_MAP_EXTERNAL_ALLOCATION", 34: "UVM_FREE", 37: "UVM_REGISTER_GPU", 38: "UVM_UNREGISTER_GPU",
    39: "UVM_PAGEABLE_MEM_ACCESS", 51: "UVM_MIGRATE", 65: "UVM_MAP_DYNAMIC_PARALLELISM_REGION",
    66: "UVM_UNMAP_EXTERNAL", 68: "UVM_ALLOC_SEMAPHORE_POOL", 72: "UVM_VALIDATE_VA_RANGE",
    73: "UVM_CREATE_EXTERNAL_RANGE", 75: "UVM_MM_INITIALIZE",
}
SIZE = 16384
FILL = b"\xab" * 4


def main():
    try:
        with open("/sys/module/nvidia/version") as f:
            version = f.read().strip()
    except OSError:
        version = "?"
    print(f"driver: {version}")
    libc = ctypes.CDLL(None, use_errno=True)
    for nr, name in sorted(COMMANDS.items()):
        fd = os.open("/dev/nvidia-uvm", os.O_RDWR)
        try:
            buf = ctypes.create_string_buffer(FILL * (SIZE // 4), SIZE)
            failed = libc.ioctl(fd, ctypes.c_ulong(nr), buf) < 0
        finally:
            os.close(fd)
        changed = [i for i in range(0, SIZE, 4) if buf.raw[i:i + 4] != FILL]
        if failed or len(changed) != 1:
            print(f"{nr} {name} - {os.strerror(ctypes.get_errno()) if failed else f'{len(changed)} words changed'}")
            continue
        status = int.from_bytes(buf.raw[changed[0]:changed[0] + 4], sys.byteorder)
        print(f"{nr} {name} {changed[0]} 0x{status:x}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
