#!/usr/bin/env python3
"""A basic-mode XRay log (version 3) unlike what the runtime's buffered threads usually
give: four threads whose records interleave in time one by one (each thread's clock
moves 1-19 ticks a record), written in runs of 1,024 records a thread, so the merge by
TSC changes thread at almost every record. Calls nest up to 12 deep over 300 functions,
each calling one of three callees of its own (a fixed call graph, as programs have).
usage: xray-basic-gen.py OUT [RECORDS]   (default 4,800,000 records: 154 MB)"""
import random
import struct
import sys


def rec(typ, fid, tsc, tid):
    # basic-mode record: type 0, CPU 1, entry 0 / exit 1, function, TSC, thread, process
    return struct.pack('<HBBiQII8x', 0, 1, typ, fid, tsc, tid, 77)


def main():
    out_path = sys.argv[1]
    want = int(sys.argv[2]) if len(sys.argv) > 2 else 4_800_000
    rng = random.Random(7)
    callees = [[1 + rng.randrange(300) for _ in range(3)] for _ in range(301)]
    threads = (11, 12, 13, 14)
    stacks = {t: [] for t in threads}
    tsc = {t: 100 for t in threads}
    parts = [struct.pack('<HHIQQ8x', 3, 0, 3, 1000000, 0)]
    total = 0
    while total < want:
        for t in threads:
            st, run = stacks[t], []
            for _ in range(1024):
                if st and (len(st) >= 12 or rng.random() < 0.45):
                    run.append(rec(1, st.pop(), tsc[t], t))
                else:
                    fid = rng.choice(callees[st[-1]]) if st else 1 + rng.randrange(10)
                    st.append(fid)
                    run.append(rec(0, fid, tsc[t], t))
                tsc[t] += rng.randrange(1, 20)
            parts.append(b''.join(run))
            total += 1024
    with open(out_path, 'wb') as f:
        f.write(b''.join(parts))


main()
