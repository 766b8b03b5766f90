#!/usr/bin/env python3
"""A Kanata log whose instructions stay in flight for tens of cycles (a 48-entry ROB per
thread, 2 simulated threads): every chunk seam cuts through ~100 live instructions.
FIRST_ID numbers the instructions from there (a simulator's sequence numbers seldom start
at 0: a chunk's state must not grow with them).
usage: kanata-inflight.py MBYTES OUT [SEED [FIRST_ID]]"""
import random, sys

mb, out = int(sys.argv[1]), sys.argv[2]
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
first_id = int(sys.argv[4]) if len(sys.argv) > 4 else 0
ROB, WIDTH = 48, 2
STAGES = ("F", "Dc", "Rn", "Ds", "Is", "Cm")
pending = {}   # cycle -> lines
def at(c, line):
    pending.setdefault(c, []).append(line)

with open(out, "w", buffering=1 << 20) as f:
    f.write("Kanata\t0004\nC=\t0\n")
    cyc, nid, rid = 0, first_id, 0
    live = {0: [], 1: []}          # per thread: [(id, retire cycle)]
    last_retire = {0: 0, 1: 0}
    limit = mb * 1000000
    while f.tell() < limit:
        lines = pending.pop(cyc, [])
        for t in (0, 1):
            for _ in range(WIDTH):
                if len(live[t]) >= ROB:
                    break
                i = nid; nid += 1
                pc = 0x400000 + rng.randrange(0, 1 << 16) * 4
                lines.append("I\t%d\t%d\t%d" % (i, i, t))
                lines.append("L\t%d\t0\t%x: op%d r%d, r%d" % (i, pc, rng.randrange(40), rng.randrange(32), rng.randrange(32)))
                c = cyc
                for s in STAGES:
                    if c == cyc:
                        lines.append("S\t%d\t0\t%s" % (i, s))
                    else:
                        at(c, "S\t%d\t0\t%s" % (i, s))
                    c += 1 + (rng.randrange(12) if s in ("Ds", "Is") else rng.randrange(2))
                # in-order retire per thread, tens of cycles after fetch
                r = max(c + rng.randrange(20, 40), last_retire[t] + 1)
                last_retire[t] = r
                live[t].append(i)
                at(r, ("R", i, t))
        done = []
        for l in lines:
            if isinstance(l, tuple):
                _, i, t = l
                kind = 1 if rng.random() < 0.002 else 0
                done.append("R\t%d\t%d\t%d" % (i, rid, kind))
                rid += 1
                live[t].remove(i)
            else:
                done.append(l)
        f.write("\n".join(done))
        f.write("\nC\t1\n")
        cyc += 1
    for c in sorted(pending):
        for l in pending[c]:
            if isinstance(l, tuple):
                f.write("R\t%d\t%d\t0\n" % (l[1], rid)); rid += 1
            else:
                f.write(l + "\n")
        f.write("C\t1\n")
