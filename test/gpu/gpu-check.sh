#!/usr/bin/env bash
# GPU machine check of the gpu receiver (`make gpu-check`): on a machine with
# an NVIDIA GPU, as root, with PyTorch, it runs the collector with
# test/gpu/collector.yaml (the gpu receiver into file exporters), drives
# cuda:0 to out-of-memory with test/gpu/oom.py, stops the collector and
# prints a summary (test/gpu/summarize.py) of what the receiver reported:
# NVML metrics per GPU, the workload's driver ioctls, its failed and slow
# calls (is NV_ERR_NO_MEMORY among them?), XID and memory-high records, the
# XIDs read from the kernel log against the kernel log's own count, and
# the receiver's own counters. About 2-3 minutes.
#
# Environment:
#   LOOM_BIN               collector binary (default bin/otelcol-loom)
#   LOOM_GPU_CHECK_DIR     output directory (default a new /tmp/loom-gpu-check.*):
#                          metrics.json, logs.json, collector.log, oom.log, telemetry.txt,
#                          uvm-status-offsets.txt
#   LOOM_GPU_CHECK_PYTHON  the python with torch that runs oom.py (default python3)
#
# Exit status: 0 when the collector ran and exported metrics, even when no
# NV_ERR_NO_MEMORY was seen (the summary's verdict says so); 1 when a
# prerequisite is missing, the collector did not start, or it exported no
# metrics; 3 when the kmsg source reported fewer or more XIDs than the kernel
# log holds.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

LOOM_BIN=${LOOM_BIN:-bin/otelcol-loom}
PY=${LOOM_GPU_CHECK_PYTHON:-python3}
CONFIG=test/gpu/collector.yaml
TELEMETRY_URL=http://127.0.0.1:18888/metrics # service::telemetry in $CONFIG
INTERVAL_S=2                                 # gpu::collection_interval in $CONFIG
WORKLOAD_COMM=loom-oom-check                 # the comm oom.py gives itself
HOLD_S=5                                     # oom.py holds the full GPU this long

log() { printf '[gpu-check %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
fail() {
	log "FAIL: $*"
	exit 1
}
http_get() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsS --max-time 3 "$1"
	else
		python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())' "$1"
	fi
}

# ---- prerequisites -----------------------------------------------------------
missing=()
[[ $(id -u) -eq 0 ]] || missing+=("root: eBPF tracing needs it; run: sudo make gpu-check (or sudo bash $0)")
command -v nvidia-smi >/dev/null 2>&1 || missing+=("nvidia-smi is not on PATH (NVIDIA driver utilities not installed?)")
[[ -c /dev/nvidiactl ]] || missing+=("/dev/nvidiactl does not exist (NVIDIA kernel driver not loaded, or the device is not passed into this container)")
command -v python3 >/dev/null 2>&1 || missing+=("python3 is not on PATH (the summary needs it)")
if ! command -v "$PY" >/dev/null 2>&1; then
	missing+=("$PY is not on PATH (set LOOM_GPU_CHECK_PYTHON to the python that has torch)")
elif ! torch_msg=$("$PY" -c 'import torch
ok = torch.cuda.is_available()
print(("torch %s, CUDA %s, %d device(s)" % (torch.__version__, torch.version.cuda, torch.cuda.device_count())) if ok else
      ("torch %s (CUDA %s) is installed but torch.cuda.is_available() is False" % (torch.__version__, torch.version.cuda)))
raise SystemExit(0 if ok else 1)' 2>&1); then
	missing+=("PyTorch with CUDA via $PY: $(printf '%s' "$torch_msg" | tail -n 1) (set LOOM_GPU_CHECK_PYTHON to a python with CUDA torch)")
fi
if [[ ! -x $LOOM_BIN ]]; then
	missing+=("collector binary $LOOM_BIN: build it with make build, or set LOOM_BIN")
elif ! "$LOOM_BIN" components 2>/dev/null | grep -Eq '^[[:space:]]*-[[:space:]]*name:[[:space:]]*gpu[[:space:]]*$'; then
	missing+=("$LOOM_BIN has no gpu receiver ($LOOM_BIN components): add receiver/gpureceiver to builder-config.yaml and make build")
fi
if ((${#missing[@]})); then
	log "missing prerequisites:"
	for m in "${missing[@]}"; do log "  - $m"; done
	exit 1
fi
log "python: $torch_msg"

# The tracer attaches fentry/fexit (needs BTF) or falls back to the syscall
# tracepoints (needs tracefs).
if ! { mountpoint -q /sys/kernel/tracing 2>/dev/null || grep -qs ' /sys/kernel/tracing ' /proc/mounts; }; then
	if mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
		log "mounted tracefs at /sys/kernel/tracing"
	else
		log "WARN: tracefs is not mounted at /sys/kernel/tracing and mounting it failed (the tracepoint fallback of eBPF tracing needs it)"
	fi
fi

# ---- the machine -------------------------------------------------------------
log "GPUs:"
nvidia-smi -L 2>&1 | sed 's/^/    /' || true
nvidia-smi --query-gpu=index,name,memory.used,memory.total,mig.mode.current --format=csv,noheader 2>&1 | sed 's/^/    /' || true
log "driver: $(cat /sys/module/nvidia/version 2>/dev/null || echo '? (no /sys/module/nvidia/version)'); kernel: $(uname -r); BTF: $([[ -e /sys/kernel/btf/vmlinux ]] && echo yes || echo 'no (fentry unavailable; tracepoints are used)'); nvidia-uvm: $(grep -qs ' nvidia-uvm$' /proc/devices && echo loaded || echo 'not loaded')"

# ---- the collector -------------------------------------------------------------
export LOOM_GPU_CHECK_DIR=${LOOM_GPU_CHECK_DIR:-$(mktemp -d /tmp/loom-gpu-check.XXXXXX)}
DIR=$LOOM_GPU_CHECK_DIR
mkdir -p "$DIR"
rm -f "$DIR"/metrics.json "$DIR"/logs.json "$DIR"/collector.log "$DIR"/oom.log "$DIR"/telemetry.txt "$DIR"/uvm-status-offsets.txt
log "output directory: $DIR"

if (exec 3<>/dev/tcp/127.0.0.1/18888) 2>/dev/null; then
	fail "something already listens on 127.0.0.1:18888, the collector's telemetry port in $CONFIG (another collector?); stop it first"
fi
if ! "$LOOM_BIN" validate --config "$CONFIG" >"$DIR/validate.log" 2>&1; then
	sed 's/^/    /' "$DIR/validate.log" | head -n 20
	fail "$LOOM_BIN validate --config $CONFIG failed"
fi

COL_PID=
cleanup() { # oom.py runs in the foreground: only the collector can be left over
	if [[ -n $COL_PID ]] && kill -0 "$COL_PID" 2>/dev/null; then
		kill -TERM "$COL_PID" 2>/dev/null || true
		for _ in $(seq 20); do kill -0 "$COL_PID" 2>/dev/null || break; sleep 0.5; done
		kill -KILL "$COL_PID" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

collector_log_tail() {
	log "collector log (last 40 lines of $DIR/collector.log):"
	tail -n 40 "$DIR/collector.log" | cut -c1-400 | sed 's/^/    /' || true
}

log "starting $LOOM_BIN --config $CONFIG"
"$LOOM_BIN" --config "$CONFIG" >"$DIR/collector.log" 2>&1 &
COL_PID=$!
up=
for _ in $(seq 120); do # 60 s
	if ! kill -0 "$COL_PID" 2>/dev/null; then
		collector_log_tail
		fail "the collector exited during start-up"
	fi
	if http_get "$TELEMETRY_URL" >/dev/null 2>&1 && grep -q 'Everything is ready' "$DIR/collector.log"; then
		up=1
		break
	fi
	sleep 0.5
done
if [[ -z $up ]]; then
	collector_log_tail
	fail "the collector did not come up within 60s (telemetry $TELEMETRY_URL and 'Everything is ready' in its log)"
fi
log "collector up (pid $COL_PID); a baseline scrape first"
sleep "$INTERVAL_S"

# ---- the workload --------------------------------------------------------------
log "running test/gpu/oom.py (at most 150s)"
set +e
timeout 150 "$PY" test/gpu/oom.py "$HOLD_S" 2>&1 | tee "$DIR/oom.log"
OOM_RC=${PIPESTATUS[0]}
set -e
OOM_PID=$(sed -n 's/^oom\.py: pid=\([0-9][0-9]*\).*/\1/p' "$DIR/oom.log" | head -n 1 || true)
case $OOM_RC in
0) ;;
124) log "WARN: oom.py did not finish within 150s and was killed" ;;
*) log "WARN: oom.py exited with status $OOM_RC" ;;
esac
if ! grep -q '^oom\.py: OutOfMemoryError' "$DIR/oom.log"; then
	log "WARN: oom.py saw no torch.cuda.OutOfMemoryError: no NV_ERR_NO_MEMORY is to be expected"
fi
log "waiting $((2 * INTERVAL_S + 1))s for two more scrapes"
sleep $((2 * INTERVAL_S + 1))

# ---- stop ------------------------------------------------------------------------
http_get "$TELEMETRY_URL" >"$DIR/telemetry.txt" 2>&1 || log "WARN: could not scrape $TELEMETRY_URL"
if ! kill -0 "$COL_PID" 2>/dev/null; then
	log "WARN: the collector died during the check"
	collector_log_tail
fi
log "stopping the collector (SIGTERM)"
kill -TERM "$COL_PID" 2>/dev/null || true
for _ in $(seq 40); do # 20 s
	kill -0 "$COL_PID" 2>/dev/null || break
	sleep 0.5
done
if kill -0 "$COL_PID" 2>/dev/null; then
	log "WARN: the collector did not stop within 20s of SIGTERM; killing it"
	kill -KILL "$COL_PID" 2>/dev/null || true
fi
COL_RC=0
wait "$COL_PID" 2>/dev/null || COL_RC=$?
COL_PID=
log "collector exited with status $COL_RC"
# The XID lines the kernel log holds now, after the collector: the kmsg
# source must have reported each (from_start in $CONFIG). Read without blocking; -1 when it cannot be read.
KERNEL_XIDS=$(python3 -c 'import os
try:
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
except OSError:
    print(-1); raise SystemExit
n = 0
while True:
    try:
        rec = os.read(fd, 8192)
    except BlockingIOError:
        break
    except BrokenPipeError:  # overwritten while reading: go on
        continue
    if not rec:
        break
    n += b"NVRM: Xid (" in rec.split(b"\n", 1)[0]
print(n)')
log "kernel log: $KERNEL_XIDS 'NVRM: Xid' line(s)"
# Where this driver writes each uvm command's status, against the tracer's
# layouts: kept as a test fixture, a driver's file makes the layouts a test.
if python3 test/gpu/uvm_status_offsets.py >"$DIR/uvm-status-offsets.txt" 2>&1; then
	log "uvm status offsets of this driver: $DIR/uvm-status-offsets.txt (copy it to receiver/gpureceiver/internal/ioctltrace/testdata/uvm-status-offsets-$(cat /sys/module/nvidia/version 2>/dev/null || echo DRIVER).txt and run that package's tests to check the tracer's layouts)"
else
	log "WARN: test/gpu/uvm_status_offsets.py failed: $(tail -n 1 "$DIR/uvm-status-offsets.txt")"
fi


# ---- report ----------------------------------------------------------------------
echo
log "collector warnings and errors (first 30; they say whether NVML or eBPF tracing was unavailable):"
grep -iE 'warn|error' "$DIR/collector.log" | head -n 30 | cut -c1-500 | sed 's/^/    /' || true
grep -E 'Tracing NVIDIA driver ioctls' "$DIR/collector.log" | head -n 1 | cut -c1-500 | sed 's/^/    /' || true

echo
set +e
python3 test/gpu/summarize.py --dir "$DIR" --pid "${OOM_PID:-0}" --comm "$WORKLOAD_COMM" --telemetry "$DIR/telemetry.txt" --kernel-xids "$KERNEL_XIDS"
SUM_RC=$?
set -e
echo
log "files: $DIR (metrics.json logs.json collector.log oom.log telemetry.txt uvm-status-offsets.txt)"
case $SUM_RC in
0) ;;
2) fail "the collector exported no metrics (see the collector warnings above)" ;;
3) fail "the kmsg source missed XID lines of the kernel log (see (f))" ;;
*) fail "test/gpu/summarize.py failed with status $SUM_RC" ;;
esac
log "done (oom.py exit status $OOM_RC, collector exit status $COL_RC)"
