#!/usr/bin/env python3
"""GPU out-of-memory workload of `make gpu-check` (test/gpu/gpu-check.sh).

Allocates 1 GiB tensors on cuda:0 with torch.empty (no compute, no fill)
until torch.cuda.OutOfMemoryError, holds them for a few seconds so that the
gpu receiver's scrapes see the memory full, frees them and exits 0. The
failed allocation is what the receiver should see as a driver ioctl that
returns NV_ERR_NO_MEMORY.

The process renames itself (comm) to loom-oom-check before CUDA starts, so
that the receiver's process.command identifies it even where the pid the
kernel reports (the host's) differs from os.getpid() (a container's pid
namespace). Its output lines start with "oom.py:"; the pid line is
"oom.py: pid=<pid> comm=<comm>".

Usage: oom.py [hold_seconds]   (default 5)
"""

import ctypes
import os
import sys
import time

COMM = b"loom-oom-check"  # at most 15 bytes: the kernel's comm
GIB = 1 << 30
DEADLINE_S = 100  # stop allocating after this long, OOM or not
SLACK_GIB = 8  # allocations allowed beyond what mem_get_info reports free


def say(msg):
    print("oom.py: " + msg, flush=True)


def set_comm():
    """Names the main thread, the thread group leader, before CUDA starts
    its threads (they inherit the name); returns the comm now in effect."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, ctypes.c_char_p(COMM), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError) as e:
        say(f"could not set comm: {e}")
    try:
        with open("/proc/self/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def main():
    hold_s = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    comm = set_comm()
    nspid = ""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    nspid = " nspid=" + ",".join(line.split()[1:])
    except OSError:
        pass
    say(f"pid={os.getpid()} comm={comm}{nspid}")

    import torch

    say(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuda available: {torch.cuda.is_available()}")
    if not torch.cuda.is_available():
        say("CUDA is not available to torch: nothing to do")
        return 1
    dev = torch.device("cuda:0")
    props = torch.cuda.get_device_properties(dev)
    free, total = torch.cuda.mem_get_info(dev)
    say(f"device cuda:0 = {props.name}, {total / GIB:.1f} GiB total, {free / GIB:.1f} GiB free")

    cap = int(free // GIB) + SLACK_GIB
    oom_error = getattr(torch.cuda, "OutOfMemoryError", RuntimeError)  # torch < 1.13: RuntimeError
    held = []
    oom = None  # the error's message
    start = time.monotonic()
    while len(held) < cap:
        if time.monotonic() - start > DEADLINE_S:
            say(f"stopped after {DEADLINE_S}s without an out-of-memory error")
            break
        try:
            held.append(torch.empty(GIB, dtype=torch.uint8, device=dev))
        except oom_error as e:
            if "out of memory" not in str(e).lower():
                raise
            oom = str(e).strip()
            break
        if len(held) % 16 == 0:
            say(f"{len(held)} GiB allocated")
    elapsed = time.monotonic() - start
    torch.cuda.synchronize(dev)
    free_now, _ = torch.cuda.mem_get_info(dev)
    if oom is not None:
        first = oom.splitlines()[0] if oom else ""
        say(f"OutOfMemoryError after {len(held)} GiB in {elapsed:.1f}s: {first[:300]}")
    else:
        say(f"NO OutOfMemoryError: got {len(held)} GiB (cap {cap}) in {elapsed:.1f}s")
    say(f"holding {len(held)} GiB for {hold_s:g}s ({free_now / GIB:.2f} GiB left free)")
    time.sleep(hold_s)

    del held
    torch.cuda.empty_cache()
    torch.cuda.synchronize(dev)
    free_after, _ = torch.cuda.mem_get_info(dev)
    say(f"freed; {free_after / GIB:.1f} GiB free; result: {'OOM' if oom is not None else 'no OOM'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
