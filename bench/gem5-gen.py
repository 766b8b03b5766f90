#!/usr/bin/env python3
"""An O3PipeView trace of N instructions for bench/gem5.sh: one CPU, seven stage records
per instruction, a random issue wait and completion time, 5 % squashed, and records
printed in the order gem5 prints them (as instructions leave the pipeline: out of seqNum
order within a small window). Deterministic (seed 1).

usage: bench/gem5-gen.py N > trace.txt
"""
import random
import sys

n = int(sys.argv[1])
random.seed(1)
TICK = 500
out = sys.stdout
held = []   # (leave tick, text) of instructions still in the pipeline
t = 1000
for seq in range(1, n + 1):
    fetch = t + random.randint(0, 3) * TICK
    decode, rename, dispatch = fetch + TICK, fetch + 2 * TICK, fetch + 3 * TICK
    issue = dispatch + TICK * random.randint(1, 20)
    complete = issue + TICK * random.randint(1, 5)
    leave = complete + TICK * random.randint(1, 10)
    retire = 0 if random.random() < 0.05 else leave   # 0: squashed
    p = f"{leave:7d}: system.cpu: O3PipeView:"
    held.append((leave, f"{p}fetch:{fetch}:0x{0x1000 + 4 * seq:08x}:0:{seq}: add r{seq % 8}, r2\n"
                        f"{p}decode:{decode}\n{p}rename:{rename}\n{p}dispatch:{dispatch}\n"
                        f"{p}issue:{issue}\n{p}complete:{complete}\n{p}retire:{retire}:store:0\n"))
    t += TICK
    if len(held) > 64:   # the oldest half leave, in the order they left
        held.sort(key=lambda x: x[0])
        out.writelines(text for _, text in held[:32])
        held = held[32:]
held.sort(key=lambda x: x[0])
out.writelines(text for _, text in held)
