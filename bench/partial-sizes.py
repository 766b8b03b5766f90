#!/usr/bin/env python3
"""Where the bytes of a partial result go (docs/formats/partial.md, version 1): the sum of
each section over all profiles in the given .tkp files, and the counts of their records.
usage: bench/partial-sizes.py PART.tkp..."""
import struct
import sys
from collections import Counter

size = Counter()
count = Counter()


def u32(b, o):
    return struct.unpack_from('<I', b, o)[0], o + 4


def u64(b, o):
    return struct.unpack_from('<Q', b, o)[0], o + 8


def array(b, o, name, rec, wide=4):
    n, o2 = (u32 if wide == 4 else u64)(b, o)
    size[name] += wide + n * rec
    count[name] += n
    return o2 + n * rec


def profile(b, o, end):
    size['header'] += 156
    o += 156
    o = array(b, o, 'functions', 24)
    o = array(b, o, 'nodes', 69)
    o = array(b, o, 'durations', 12, 8)
    o = array(b, o, 'blocks', 32)
    nt, o = u32(b, o)
    start = o
    for _ in range(nt):
        o += 153
        nu, o = u64(b, o)
        o += 8 * min(nu, 16)
        depth, o = u32(b, o)
        o += 46 * depth
        count['frames'] += depth
        o += 8
        norph, o = u32(b, o)
        o += 52 * norph
        count['orphans'] += norph
    size['tracks'] += 4 + o - start
    count['tracks'] += nt
    assert o == end, (o, end)


for path in sys.argv[1:]:
    b = open(path, 'rb').read()
    assert b[:8] == b'TKPART\r\n'
    v, o = u32(b, 8)
    assert v == 1, 'version %d: this script reads version 1' % v
    o += 4
    n, o = u32(b, o)
    o += n + 8
    nin, o = u32(b, o)
    for _ in range(nin):
        n, o = u32(b, o)
        o += n + 8 + 8 + 12
        nparts, o = u32(b, o)
        for _ in range(nparts):
            o += 4
            ln, o = u64(b, o)
            count['profiles'] += 1
            profile(b, o, o + ln)
            o += ln
    size['file'] += len(b)

total = size['file']
print('%-10s %14s %6s %12s' % ('section', 'bytes', '%', 'records'))
for k in ('header', 'functions', 'nodes', 'durations', 'blocks', 'tracks'):
    print('%-10s %14d %5.1f%% %12d' % (k, size[k], 100.0 * size[k] / total, count[k]))
print('%-10s %14d        profiles %d, frames %d, orphans %d' % ('file', total, count['profiles'],
      count['frames'], count['orphans']))
