#!/usr/bin/env python3
"""Summary of a `make gpu-check` run (test/gpu/gpu-check.sh); stdlib only.

Reads the file exporter's OTLP JSON lines (DIR/metrics.json, DIR/logs.json)
and the collector's own metrics scraped from its telemetry endpoint, and
prints, compactly:
  (a) per GPU: last and peak memory, utilization, power, temperature, and
      the metric names seen;
  (b) the ioctl calls of the workload by escape/status/errno (last value of
      each nvidia.ioctl.calls series) and the top escapes overall;
  (c) the workload's gpu.ioctl.failed / gpu.ioctl.slow records, and whether
      NV_ERR_NO_MEMORY was seen;
  (d) gpu.xid and gpu.memory.high records;
  (f) the XIDs read from the kernel log against the kernel log's own count;
  (e) the receiver's own counters (otelcol_receiver_gpu_*);
and, in the verdict, the workload's statuses no NV_STATUS name fits (a
parameter layout that does not fit the driver) and its calls with no known
layout.

The workload is matched by process.pid (--pid, repeatable) or by
process.command (--comm): the kernel reports the host's pid, which is not
os.getpid() inside a container's pid namespace.

Exit status: 0, or 2 when metrics.json is missing or holds no data point.
"""

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict

NO_MEMORY = "NV_ERR_NO_MEMORY"
IOCTL_EVENTS = ("gpu.ioctl.failed", "gpu.ioctl.slow")
NVML_EVENTS = ("gpu.xid", "gpu.memory.high")
GIB = float(1 << 30)


# ---- OTLP JSON -------------------------------------------------------------

def anyvalue(v):
    """An OTLP JSON AnyValue as a Python value (intValue is a string)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "doubleValue" in v:
        return number(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [anyvalue(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return attributes((v["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def attributes(kvs):
    out = {}
    for kv in kvs or []:
        if isinstance(kv, dict) and "key" in kv:
            out[kv["key"]] = anyvalue(kv.get("value"))
    return out


def number(x):
    """A JSON number, or a string holding one ("123", "NaN", "Infinity")."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return x
    try:
        return int(x)
    except (TypeError, ValueError):
        pass
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def point_value(dp):
    """Value of a gauge or sum point (asInt is a string in OTLP JSON; 0 is
    left out), or the count of a histogram point."""
    for k in ("asDouble", "asInt"):
        if k in dp:
            return number(dp[k])
    if "count" in dp or "bucketCounts" in dp or "explicitBounds" in dp:
        return number(dp.get("count", 0))
    return 0


def nanos(x):
    n = number(x)
    return int(n) if n else 0


def read_lines(path, what):
    """Yields the JSON objects of a file exporter's file, one per line."""
    bad = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except ValueError:
                bad += 1
    if bad:
        print(f"  ({bad} unreadable line(s) in {what})")


def hashable(v):
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    return v


# ---- formatting --------------------------------------------------------------

def fmt_num(v, digits=3):
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:
            return "NaN"
        if abs(v) >= 1000 or v == int(v):
            return str(int(round(v)))
        return f"{v:.{digits}g}"
    return str(v)


def fmt_time(ns):
    if not ns:
        return "--:--:--"
    s = ns / 1e9
    return time.strftime("%H:%M:%S", time.localtime(s)) + f".{int(s * 1000) % 1000:03d}"


def table(rows, header=None, indent="    "):
    """Left-aligned columns; returns lines."""
    rows = [[str(c) for c in r] for r in rows]
    if not rows:
        return []
    if header:
        rows.insert(0, list(header))
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(len(r) for r in rows))]
    return [indent + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]


def section(title):
    print()
    print(f"== {title}")


# ---- metrics ---------------------------------------------------------------

class Series:
    __slots__ = ("last_t", "last_i", "last", "peak", "low", "n", "extra")

    def __init__(self):
        self.last_t, self.last_i, self.last, self.peak, self.low, self.n, self.extra = -1, -1, None, None, None, 0, None

    def add(self, t, i, v, extra=None):
        self.n += 1
        if v is not None:
            self.peak = v if self.peak is None else max(self.peak, v)
            self.low = v if self.low is None else min(self.low, v)
        if (t, i) >= (self.last_t, self.last_i):
            self.last_t, self.last_i, self.last, self.extra = t, i, v, extra


def load_metrics(path):
    """Returns (series, resources, names, stats): series maps (resource key,
    metric name, attribute items) to a Series; resources maps the resource
    key (hw.id, or "" for host-level) to its attributes; names maps the
    resource key to the metric names seen."""
    series = defaultdict(Series)
    resources = {}
    names = defaultdict(set)
    stats = {"lines": 0, "points": 0, "t_min": 0, "t_max": 0}
    order = 0
    for doc in read_lines(path, os.path.basename(path)):
        stats["lines"] += 1
        for rm in doc.get("resourceMetrics") or []:
            res = attributes((rm.get("resource") or {}).get("attributes"))
            rkey = str(res.get("hw.id", ""))
            resources.setdefault(rkey, {}).update(res)
            for sm in rm.get("scopeMetrics") or []:
                for m in sm.get("metrics") or []:
                    name = m.get("name", "?")
                    names[rkey].add(name)
                    for kind in ("gauge", "sum", "histogram", "exponentialHistogram", "summary"):
                        if kind in m:
                            break
                    else:
                        continue
                    for dp in (m.get(kind) or {}).get("dataPoints") or []:
                        order += 1
                        stats["points"] += 1
                        t = nanos(dp.get("timeUnixNano"))
                        if t:
                            stats["t_min"] = t if not stats["t_min"] else min(stats["t_min"], t)
                            stats["t_max"] = max(stats["t_max"], t)
                        a = attributes(dp.get("attributes"))
                        key = (rkey, name, tuple(sorted((k, hashable(v)) for k, v in a.items())))
                        extra = None
                        if kind == "histogram":
                            extra = number(dp.get("sum"))
                        series[key].add(t, order, point_value(dp), extra)
    return series, resources, names, stats


def gpu_section(series, resources, names):
    section("(a) GPUs (NVML)")
    gpus = sorted(k for k in resources if k)
    if not gpus:
        print("  !! no per-GPU resource (hw.id) in the metrics: NVML unavailable? see the collector warnings")
    by_res = defaultdict(dict)  # rkey -> name -> [(attrs, Series)]
    for (rkey, name, items), s in series.items():
        by_res[rkey].setdefault(name, []).append((dict(items), s))

    def one(rkey, name):
        lst = by_res[rkey].get(name) or []
        return lst[0][1] if lst else None

    for g in gpus:
        r = resources[g]
        ident = ", ".join(f"{k}={r[k]}" for k in ("hw.name", "nvidia.gpu.index", "hw.parent", "hw.driver_version") if k in r)
        print(f"  {g}  {r.get('hw.model', '?')}  ({ident})")
        use, lim = one(g, "hw.gpu.memory.usage"), one(g, "hw.gpu.memory.limit")
        if use is not None:
            limit = lim.last if lim is not None and lim.last else None
            def gib(v):
                if v is None:
                    return "-"
                pct = f" ({100.0 * v / limit:.1f}%)" if limit else ""
                return f"{v / GIB:.2f} GiB{pct}"
            print(f"    memory: last {gib(use.last)} of {limit / GIB if limit else 0:.2f} GiB; peak {gib(use.peak)}")
        else:
            print("    memory: no hw.gpu.memory.usage")
        parts = []
        for attrs, s in sorted(by_res[g].get("hw.gpu.utilization") or [], key=lambda x: str(x[0])):
            task = attrs.get("hw.gpu.task", "?")
            parts.append(f"{task} {fmt_num(s.last)} (max {fmt_num(s.peak)})")
        for name, label in (("nvidia.gpu.memory.activity", "memory activity"), ("nvidia.gpu.sm.activity", "SM activity (GPM)")):
            s = one(g, name)
            if s is not None:
                parts.append(f"{label} {fmt_num(s.last)} (max {fmt_num(s.peak)})")
        print("    utilization: " + ("; ".join(parts) if parts else "none reported"))
        pw, tp = one(g, "hw.power"), one(g, "nvidia.gpu.temperature")
        print(f"    power: {fmt_num(pw.last) if pw else '-'} W (max {fmt_num(pw.peak) if pw else '-'}); "
              f"temperature: {fmt_num(tp.last) if tp else '-'} C (max {fmt_num(tp.peak) if tp else '-'})")
        procs = by_res[g].get("nvidia.gpu.process.memory.usage") or []
        if procs:
            top = sorted(procs, key=lambda x: -(x[1].peak or 0))[:4]
            print("    process memory peak: " + "; ".join(
                f"{a.get('process.pid')} {a.get('process.command', '')} {(s.peak or 0) / GIB:.2f} GiB" for a, s in top))
        ns = sorted(names.get(g, ()))
        print(f"    metrics ({len(ns)}): " + ", ".join(ns))
    host = sorted(names.get("", ()))
    if host:
        print(f"  host-level metrics: {', '.join(host)}")


def ioctl_section(series, match):
    section("(b) nvidia.ioctl.calls (last value per series)")
    calls = {}  # (pid, command, escape, status, errno) -> calls
    durs = {}  # same key -> total seconds
    for (rkey, name, items), s in series.items():
        if name not in ("nvidia.ioctl.calls", "nvidia.ioctl.duration"):
            continue
        a = dict(items)
        k = (a.get("process.pid"), str(a.get("process.command", "")), str(a.get("nvidia.ioctl.escape", "?")),
             str(a.get("nvidia.ioctl.status", "?")), str(a.get("nvidia.ioctl.errno", "?")))
        if name == "nvidia.ioctl.calls":
            calls[k] = (calls.get(k) or 0) + (s.last or 0)
        else:
            durs[k] = (durs.get(k) or 0) + (s.extra or 0)
    if not calls:
        print("  !! no nvidia.ioctl.calls series: eBPF tracing unavailable? see the collector warnings")
        return calls
    mine = {k: v for k, v in calls.items() if match(k[0], k[1])}
    pids = sorted({(k[0], k[1]) for k in mine}, key=str)
    print(f"  workload: {', '.join(f'pid {p} ({c})' for p, c in pids) or 'no series'}; "
          f"{sum(mine.values())} calls in {len(mine)} series")
    rows = []
    for k, v in sorted(mine.items(), key=lambda kv: (-kv[1], kv[0][2:]))[:30]:
        d = durs.get(k)
        mean = f"{1e6 * d / v:.0f}" if d is not None and v else "-"
        rows.append([k[2], k[3], k[4], v, f"{1e3 * d:.1f}" if d is not None else "-", mean])
    for line in table(rows, ["escape", "status", "errno", "calls", "total_ms", "mean_us"]):
        print(line)
    if len(mine) > 30:
        print(f"    ... {len(mine) - 30} more series")

    by_escape = defaultdict(lambda: [0, 0])
    by_proc = defaultdict(int)
    for k, v in calls.items():
        by_escape[k[2]][0] += v
        if k[3] not in ("NV_OK", "unknown") or k[4] != "none":
            by_escape[k[2]][1] += v
        by_proc[(k[0], k[1])] += v
    print(f"  all processes: {sum(calls.values())} calls, {len(calls)} series, {len(by_proc)} processes; top escapes:")
    rows = [[e, n, f] for e, (n, f) in sorted(by_escape.items(), key=lambda kv: -kv[1][0])[:10]]
    for line in table(rows, ["escape", "calls", "not_ok"]):
        print(line)
    print("  top processes: " + "; ".join(f"{p} {c} {n}" for (p, c), n in sorted(by_proc.items(), key=lambda kv: -kv[1])[:6]))
    failing = {k: v for k, v in calls.items() if (k[3] not in ("NV_OK", "unknown") or k[4] != "none")}
    if failing:
        print("  not-OK series of any process (top 8):")
        rows = [[k[0], k[1], k[2], k[3], k[4], v] for k, v in sorted(failing.items(), key=lambda kv: -kv[1])[:8]]
        for line in table(rows, ["pid", "command", "escape", "status", "errno", "calls"]):
            print(line)
    return calls


def load_logs(path):
    records = []
    for doc in read_lines(path, os.path.basename(path)):
        for rl in doc.get("resourceLogs") or []:
            res = attributes((rl.get("resource") or {}).get("attributes"))
            for sl in rl.get("scopeLogs") or []:
                for lr in sl.get("logRecords") or []:
                    a = attributes(lr.get("attributes"))
                    ev = lr.get("eventName") or a.get("event.name") or ""
                    t = nanos(lr.get("timeUnixNano")) or nanos(lr.get("observedTimeUnixNano"))
                    body = anyvalue(lr.get("body")) if lr.get("body") else ""
                    records.append({"event": ev, "t": t, "attrs": a, "res": res, "body": body,
                                    "sev": lr.get("severityText", "")})
    records.sort(key=lambda r: r["t"])
    return records


def ioctl_records_section(records, match):
    section("(c) gpu.ioctl.failed / gpu.ioctl.slow records")
    ioctl = [r for r in records if r["event"] in IOCTL_EVENTS]
    mine = [r for r in ioctl if match(r["attrs"].get("process.pid"), r["attrs"].get("process.command"))]
    print(f"  {len(ioctl)} records in all, {len(mine)} of the workload")
    rows = []
    for r in mine[:40]:
        a = r["attrs"]
        d = number(a.get("nvidia.ioctl.duration"))
        rows.append([fmt_time(r["t"]), r["event"].rsplit(".", 1)[-1], a.get("nvidia.ioctl.escape", "?"),
                     a.get("nvidia.ioctl.status", "?"), a.get("nvidia.ioctl.errno", "?"),
                     f"{1e3 * d:.2f}ms" if d is not None else "-", f"pid {a.get('process.pid')}", f"tid {a.get('thread.id')}"])
    for line in table(rows, ["time", "event", "escape", "status", "errno", "duration", "pid", "tid"]):
        print(line)
    if len(mine) > 40:
        groups = defaultdict(int)
        for r in mine:
            a = r["attrs"]
            groups[(r["event"], a.get("nvidia.ioctl.escape"), a.get("nvidia.ioctl.status"), a.get("nvidia.ioctl.errno"))] += 1
        print(f"    ... {len(mine) - 40} more; all of the workload's by kind:")
        for line in table([[*k, n] for k, n in sorted(groups.items(), key=lambda kv: -kv[1])[:12]], indent="      "):
            print(line)
    others = defaultdict(int)
    mine_ids = {id(r) for r in mine}
    for r in ioctl:
        if id(r) in mine_ids:
            continue
        a = r["attrs"]
        others[(r["event"].rsplit(".", 1)[-1], a.get("process.pid"), a.get("process.command"), a.get("nvidia.ioctl.escape"),
                a.get("nvidia.ioctl.status"), a.get("nvidia.ioctl.errno"))] += 1
    if others:
        print("  other processes' records (top 6):")
        for line in table([[*k, n] for k, n in sorted(others.items(), key=lambda kv: -kv[1])[:6]], indent="      "):
            print(line)
    return ioctl, mine


def nvml_records_section(records):
    section("(d) gpu.xid / gpu.memory.high records")
    nv = [r for r in records if r["event"] in NVML_EVENTS]
    if not nv:
        print("  none")
    for r in nv[:20]:
        a = r["attrs"]
        gid = a.get("gpu.id") or r["res"].get("hw.id", "?")
        print(f"    {fmt_time(r['t'])} {r['event']} {r['sev']} {gid}: {str(r['body'])[:160]}")
    if len(nv) > 20:
        print(f"    ... {len(nv) - 20} more")
    known = set(IOCTL_EVENTS) | set(NVML_EVENTS)
    other = defaultdict(int)
    for r in records:
        if r["event"] not in known:
            other[r["event"] or "(no event name)"] += 1
    if other:
        print("  other records: " + ", ".join(f"{k} x{n}" for k, n in sorted(other.items())))


def kmsg_section(records, kernel_xids):
    section("(f) XIDs from the kernel log (kmsg)")
    ours = [r for r in records if r["event"] == "gpu.xid" and r["attrs"].get("nvidia.xid.source") == "kmsg"]
    for r in ours[:20]:
        a = r["attrs"]
        print(f"    {fmt_time(r['t'])} XID {a.get('nvidia.xid')} PCI {a.get('nvidia.pci.bus_id')} pid {a.get('process.pid', '-')} "
              f"container {a.get('container.id', '-')[:12]}: {str(a.get('nvidia.xid.message', ''))[:100]}")
    if kernel_xids < 0:
        print(f"  {len(ours)} record(s); the kernel log's own count is unknown (it could not be read)")
        return True
    ok = len(ours) == kernel_xids
    print(f"  {'OK' if ok else '!!'}: {len(ours)} record(s) from kmsg, the kernel log holds {kernel_xids} 'NVRM: Xid' line(s)")
    return ok


LABEL_NOISE = re.compile(r'(otel_scope_[a-z_]+|service_[a-z_]+|job|instance)="[^"]*",?')


def telemetry_section(path):
    section("(e) receiver counters (collector telemetry, scraped before stopping)")
    if not path or not os.path.exists(path):
        print("  !! no telemetry scrape")
        return
    lines = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("#"):
                continue
            if "otelcol_receiver_gpu_" in line or 'receiver="gpu"' in line or 'scraper="gpu"' in line:
                line = LABEL_NOISE.sub("", line.strip()).replace(",}", "}").replace("{}", "")
                lines.append(line)
    if not any("otelcol_receiver_gpu_" in l for l in lines):
        print("  no otelcol_receiver_gpu_* series (each appears at its first increment)")
    for line in lines[:30]:
        print("    " + line)


def layout_notes(calls, match):
    """Flags the workload's statuses that no NV_STATUS name fits (on the
    first GPU run, UVM_FREE's length was read as its status: a layout that
    did not fit the driver) and lists its calls with no known layout."""
    unnamed = defaultdict(int)
    unknown = defaultdict(int)
    for k, v in calls.items():
        if not match(k[0], k[1]):
            continue
        if k[3].startswith("NV_STATUS_0x"):
            unnamed[f"{k[2]} {k[3]}"] += v
        elif k[3] == "unknown":
            unknown[k[2]] += v
    if unnamed:
        print("  WARN: statuses no NV_STATUS name fits (the parameter layout may not fit this driver): "
              + ", ".join(f"{e} ({n} calls)" for e, n in sorted(unnamed.items(), key=lambda kv: -kv[1])))
    if unknown:
        print("  calls with no known status layout, counted with status unknown: "
              + ", ".join(f"{e} {n}" for e, n in sorted(unknown.items(), key=lambda kv: -kv[1])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="directory with metrics.json and logs.json")
    ap.add_argument("--pid", action="append", default=[], help="the workload's pid (repeatable)")
    ap.add_argument("--comm", default="", help="the workload's process.command")
    ap.add_argument("--telemetry", default="", help="file with the scraped collector metrics")
    ap.add_argument("--kernel-xids", type=int, default=-1, help="how many 'NVRM: Xid' lines the kernel log held (-1: unknown)")
    args = ap.parse_args()

    pids = set()
    for p in args.pid:
        try:
            pids.add(int(p))
        except ValueError:
            pass

    def match(pid, command):
        try:
            if pid is not None and int(pid) in pids:
                return True
        except (TypeError, ValueError):
            pass
        return bool(args.comm) and command == args.comm

    mpath, lpath = os.path.join(args.dir, "metrics.json"), os.path.join(args.dir, "logs.json")
    print(f"== Summary (workload: pid {', '.join(map(str, sorted(pids))) or '?'}, command {args.comm or '?'})")
    if not os.path.exists(mpath):
        print(f"!! {mpath} does not exist: the collector exported no metrics")
        telemetry_section(args.telemetry)
        return 2
    series, resources, names, st = load_metrics(mpath)
    span = (st["t_max"] - st["t_min"]) / 1e9 if st["t_min"] else 0
    records = load_logs(lpath) if os.path.exists(lpath) else []
    print(f"  metrics.json: {st['lines']} batches, {st['points']} points, {len(series)} series over {span:.0f}s; "
          f"logs.json: {len(records)} records" + ("" if os.path.exists(lpath) else " (no file)"))
    if not st["points"]:
        print("!! metrics.json holds no data point")
        telemetry_section(args.telemetry)
        return 2

    gpu_section(series, resources, names)
    calls = ioctl_section(series, match)
    ioctl, mine = ioctl_records_section(records, match)
    nvml_records_section(records)
    kmsg_ok = kmsg_section(records, args.kernel_xids)
    telemetry_section(args.telemetry)

    section("Verdict")
    in_calls = sum(v for k, v in calls.items() if match(k[0], k[1]) and k[3] == NO_MEMORY)
    in_recs = sum(1 for r in mine if r["attrs"].get("nvidia.ioctl.status") == NO_MEMORY)
    any_calls = sum(v for k, v in calls.items() if k[3] == NO_MEMORY)
    any_recs = sum(1 for r in ioctl if r["attrs"].get("nvidia.ioctl.status") == NO_MEMORY)
    if in_calls or in_recs:
        print(f"  OK: {NO_MEMORY} seen for the workload: {in_calls} call(s) in nvidia.ioctl.calls, {in_recs} gpu.ioctl.failed record(s)")
    else:
        print("  " + "!" * 72)
        print(f"  !! NO {NO_MEMORY} seen for the workload "
              f"(any process: {any_calls} call(s), {any_recs} record(s))")
        print("  " + "!" * 72)
    layout_notes(calls, match)
    if not kmsg_ok:
        print("  !! the kmsg source did not report every XID line of the kernel log (see (f))")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
