#!/usr/bin/env python3
"""An independent reader of tracekit's branch-trace container, written from
docs/formats/tkbt.md alone, for tests.

  tkbt.py records FILE      one line per sound record: OFFSET TYPE [TID SEQ [SIZE]]
                            (offset in 16 hex digits; stream: tid seq size;
                            thread-end: tid seq)
  tkbt.py stream FILE TID   that thread's Intel PT stream (its STREAM payloads in
                            sequence order) to standard output
"""
import struct
import sys

NAMES = {1: 'module', 2: 'stream', 3: 'thread-end', 4: 'process-end', 5: 'exec', 6: 'refused'}


def fnv1a(b):
    h = 2166136261
    for x in b:
        h = ((h ^ x) * 16777619) & 0xffffffff
    return h


M64 = (1 << 64) - 1


def sum64(b):
    """Version 3's checksum: little-endian 64-bit words, the last one zero-padded."""
    h = 0x243f6a8885a308d3 ^ len(b)
    for i in range(0, len(b), 8):
        w = int.from_bytes(b[i:i + 8], 'little')
        h = ((h ^ w) * 0x9e3779b97f4a7c15) & M64
        h ^= h >> 32
    return ((h * 0xff51afd7ed558ccd) & M64) >> 32


def records(data):
    """(offset, type, tid, seq, payload) of each record whose header and checksum hold;
    after a bad one, the next 8-aligned offset where one does."""
    off = struct.unpack_from('<I', data, 12)[0]
    checksum = sum64 if struct.unpack_from('<I', data, 8)[0] >= 3 else fnv1a
    while off + 24 <= len(data):
        magic, typ, _flags, tid, n, csum, seq = struct.unpack_from('<IHHIIII', data, off)
        if magic == 0x52424b54 and typ in NAMES and off + 24 + n <= len(data) \
                and checksum(data[off + 24:off + 24 + n]) == csum:
            yield off, typ, tid, seq, data[off + 24:off + 24 + n]
            off += 24 + (n + 7) // 8 * 8
        else:
            off += 8


def main():
    data = open(sys.argv[2], 'rb').read()
    assert data[:8] == b'TKBTRACE'
    if sys.argv[1] == 'records':
        for off, typ, tid, seq, p in records(data):
            f = ['%016x' % off, NAMES[typ]]
            if typ == 2:
                f += [str(tid), str(seq), str(len(p))]
            elif typ == 3:
                f += [str(tid), str(seq)]
            print(' '.join(f))
    elif sys.argv[1] == 'stream':
        want = int(sys.argv[3])
        pieces = sorted((seq, p) for _, typ, tid, seq, p in records(data) if typ == 2 and tid == want)
        sys.stdout.buffer.write(b''.join(p for _, p in pieces))
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
