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


def records(data):
    """(offset, type, tid, seq, payload) of each record whose header and checksum hold;
    after a bad one, the next 8-aligned offset where one does."""
    off = struct.unpack_from('<I', data, 12)[0]
    while off + 24 <= len(data):
        magic, typ, _flags, tid, n, csum, seq = struct.unpack_from('<IHHIIII', data, off)
        if magic == 0x52424b54 and typ in NAMES and off + 24 + n <= len(data) \
                and fnv1a(data[off + 24:off + 24 + n]) == csum:
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
