#!/usr/bin/env python3
"""xray_filter.py YAML FOLDED CALLS [-F NAME]... [-N NAME]... [-D N] [-t TICKS]: what
`tracekit profile` with uftrace's call filters must give for an XRay log, computed from its records
(`convert --to xray-yaml`) without tracekit's profiler: each thread's calls as a tree of
call instances, the filters applied to the tree.

- -N NAME: the call and its callees count nowhere; their time leaves their callers' too.
- -F NAME: only what runs under a call of NAME counts (the time elsewhere is cut out);
  the calls below it keep their place in the paths but are not counted.
- -D N: calls deeper than N are not reported: their time stays in their caller at depth N.
- -t TICKS: a call of less than TICKS (of what counts of it) is not reported: its time
  stays in its caller.
Prints "PATH TICKS" lines (folded: self ticks per call path, the thread's time outside
every call as "[unknown]") to FOLDED and "NAME,CALLS" lines to CALLS. Names are matched
exactly. Logs whose exits do not match their enters are refused (exit 2)."""
import argparse
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("yaml")
ap.add_argument("folded")
ap.add_argument("calls")
ap.add_argument("-F", action="append", default=[])
ap.add_argument("-N", action="append", default=[])
ap.add_argument("-D", type=int, default=0)
ap.add_argument("-t", type=int, default=0)
a = ap.parse_args()
rec_re = re.compile(r"function: '?([^',]*)'?,.*thread: (\d+),.*kind: ([a-z-]+), tsc: (\d+)")

threads = {}
for line in open(a.yaml):
    m = rec_re.search(line)
    if m:
        threads.setdefault(int(m.group(2)), []).append((m.group(1), m.group(3), int(m.group(4))))


class Call:
    def __init__(self, name, t0):
        self.name, self.t0, self.t1, self.kids = name, t0, None, []


calls, folded = {}, {}


def eff(c, focus):
    """Ticks of C that count (the cut clock): C's duration less what is cut in it."""
    if c.name in a.N:
        return 0
    focus = focus or not a.F or c.name in a.F
    if not focus:
        return sum(eff(k, False) for k in c.kids)
    return (c.t1 - c.t0) - sum((k.t1 - k.t0) - eff(k, True) for k in c.kids)


def walk(c, path, depth, focus):
    """Reports C (not excluded, not too deep) and returns nothing; its parent adds C's
    effective ticks back to its own self when C is dropped for being small."""
    focus = focus or not a.F or c.name in a.F
    e = eff(c, focus)
    path = path + [c.name]
    self_t = e
    for k in c.kids:
        if k.name in a.N:
            continue
        ke = eff(k, focus)
        if (a.D and depth + 1 > a.D) or (a.t and ke < a.t):
            continue            # not reported: stays in C's self
        self_t -= ke
        walk(k, path, depth + 1, focus)
    if focus:
        calls[c.name] = calls.get(c.name, 0) + 1
        if self_t:
            key = ";".join(path)
            folded[key] = folded.get(key, 0) + self_t


for tid, recs in threads.items():
    root = Call("[unknown]", recs[0][2])
    stack = [root]
    for name, kind, t in recs:
        if kind.startswith("function-enter"):
            c = Call(name, t)
            stack[-1].kids.append(c)
            stack.append(c)
        elif kind in ("function-exit", "function-tail-exit"):
            if len(stack) < 2 or stack[-1].name != name:
                sys.exit(2)
            stack.pop().t1 = t
    end = recs[-1][2]
    for c in stack:
        c.t1 = end
    # the level below the stack: what counts of the thread's time, less its calls reported
    self_t = eff(root, False)
    for k in root.kids:
        ke = eff(k, False)
        if k.name in a.N or (a.t and ke < a.t):
            continue
        self_t -= ke
        walk(k, [], 1, False)
    if self_t:
        folded["[unknown]"] = folded.get("[unknown]", 0) + self_t

with open(a.folded, "w") as f:
    f.writelines(sorted(f"{p} {v}\n" for p, v in folded.items()))
with open(a.calls, "w") as f:
    f.writelines(sorted(f"{k},{v}\n" for k, v in calls.items()))
