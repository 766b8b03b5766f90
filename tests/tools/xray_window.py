#!/usr/bin/env python3
"""xray_window.py YAML A B: what `tracekit profile --time A:B` must give for an XRay log,
computed from its records (`convert --to xray-yaml`, equal to llvm-xray's) without
tracekit's profiler: the calls as a timeline clipped to ticks [A, B) draws them.

A call counts (calls, duration) when it begins in [A, B); every call's time is clipped to
the window; calls open at the end end at their thread's last record. Prints JSON:
{"functions": {name: {calls, incl_ticks, excl_ticks, min, max}}, "folded": {path: ticks}}
(inclusive time counts a recursion once; folded: exclusive ticks per call path, the
unknown level below the stack as "[unknown]"). Logs whose exits do not match their enters
are refused (exit 2): this reference keeps to the simple case."""
import json
import re
import sys

yaml_path, A, B = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rec_re = re.compile(r"function: '([^']*)'.*thread: (\d+),.*kind: ([a-z-]+), tsc: (\d+)")


def clip(t):
    return min(max(t, A), B)


threads = {}
for line in open(yaml_path):
    m = rec_re.search(line)
    if m:
        threads.setdefault(int(m.group(2)), []).append((m.group(1), m.group(3), int(m.group(4))))

funcs, paths = {}, {}


def func(name):
    return funcs.setdefault(name, {"calls": 0, "incl_ticks": 0, "excl_ticks": 0, "durs": []})


def path_add(path, incl, child):
    p = paths.setdefault(path, [0, 0])
    p[0] += incl
    p[1] += child


for tid, recs in threads.items():
    stack = []   # [name, clipped enter, inside, child ticks]
    base_child = 0
    for name, kind, tsc in recs:
        t = clip(tsc)
        inside = A <= tsc < B
        if kind.startswith("function-enter"):
            stack.append([name, t, inside, 0])
            if inside:
                func(name)["calls"] += 1
        elif kind in ("function-exit", "function-tail-exit"):
            if not stack or stack[-1][0] != name:
                sys.exit(f"thread {tid}: exit of {name} does not match (not handled here)")
            name, t0, ins, child = stack.pop()
            d = t - t0
            f = func(name)
            path = ";".join(s[0] for s in stack + [[name]])
            if all(s[0] != name for s in stack):
                f["incl_ticks"] += d
            f["excl_ticks"] += d - child
            path_add(path, d, child)
            if ins:
                f["durs"].append(d)
            if stack:
                stack[-1][3] += d
            else:
                base_child += d
    t_end = clip(recs[-1][2])
    while stack:   # open at the end: ended at the thread's last record, no duration
        name, t0, ins, child = stack.pop()
        d = t_end - t0
        f = func(name)
        if all(s[0] != name for s in stack):
            f["incl_ticks"] += d
        f["excl_ticks"] += d - child
        path_add(";".join(s[0] for s in stack + [[name]]), d, child)
        if stack:
            stack[-1][3] += d
        else:
            base_child += d
    level = t_end - clip(recs[0][2])
    u = func("[unknown]")
    u["incl_ticks"] += level
    u["excl_ticks"] += level - base_child
    path_add("[unknown]", level, base_child)

out = {"functions": {}, "folded": {}}
for name, f in funcs.items():
    if f["calls"] or f["incl_ticks"]:
        row = {k: f[k] for k in ("calls", "incl_ticks", "excl_ticks")}
        if f["durs"]:
            row["min"], row["max"] = min(f["durs"]), max(f["durs"])
        out["functions"][name] = row
for path, (incl, child) in paths.items():
    if incl - child:
        out["folded"][path] = incl - child
json.dump(out, sys.stdout, indent=1, sort_keys=True)
print()
