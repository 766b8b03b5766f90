#!/usr/bin/env python3
"""Generate a large synthetic xtrace (instruction + snapshot file) for the benchmarks:
xtrace-gen.py DIR MEGABYTES. A 10,000-instruction loop body (integer, loads, stores, calls,
returns, conditional branches; 8-byte memory values) is repeated; a snapshot every 1M
instructions points at the first PCINST of a loop body, so -j N has chunks to split on."""
import os
import random
import struct
import sys

out_dir, mb = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
body = bytearray()
pc = 0x400000
n = 0
BLOCK = 10000
while n < BLOCK:
    # a basic block: PCINST, then 3-9 INSTs, some with memory items
    body += struct.pack('<BQI', 0x09, pc, 0xa9bf7bfd)
    n += 1
    for _ in range(rng.randint(3, 9)):
        if n >= BLOCK - 1:
            break
        r = rng.random()
        if r < 0.25:
            body += struct.pack('<BI', 0x01, 0xf9400020)         # ldr
            body += struct.pack('<BQQ', 0x32, 0x500000 + rng.randrange(1 << 16) * 8, rng.getrandbits(64))
        elif r < 0.35:
            body += struct.pack('<BI', 0x01, 0xf9000020)         # str
            body += struct.pack('<BQQ', 0x3a, 0x500000 + rng.randrange(1 << 16) * 8, rng.getrandbits(64))
        else:
            body += struct.pack('<BI', 0x01, 0x8b020020)         # add
        n += 1
    body += struct.pack('<BI', 0x01, 0x54000041 if rng.random() < 0.7 else 0xd65f03c0)
    n += 1
    pc += 0x100
body_insns = n
os.makedirs(out_dir, exist_ok=True)
stem = os.path.join(out_dir, 'xtrace.1.1.hint9.')
reps = mb * 1024 * 1024 // len(body) + 1
vl = 128
V, pslot = vl // 8, 16
size = 288 + 32 * V + 16 * pslot + pslot + V * V + 88 + 8
with open(stem + 'xinsndata.bin', 'wb') as f, open(stem + 'xsnapshot.bin', 'wb') as s:
    s.write(struct.pack('<IIQBBB', 0x50534e58, 0, 1, 0, 0, 0) + bytes(5))
    total = 0
    for i in range(reps):
        if total % 1000000 == 0:
            rec = bytearray(size)
            struct.pack_into('<4Q', rec, 0, 0, i * len(body), total, total)
            struct.pack_into('<Q', rec, size - 8, vl)
            s.write(rec)
        f.write(body)
        total += body_insns
print(f"{stem}xinsndata.bin: {reps * len(body)} bytes, {total} instructions")
