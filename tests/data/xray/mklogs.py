#!/usr/bin/env python3
"""Hand-built XRay logs for tests: FDR versions 1-5 with every record kind (typed events
too, which clang 16's runtime cannot write), big-endian twins, basic mode with arguments,
and damaged logs. Usage: mklogs.py OUTDIR"""
import os
import struct
import sys

def hdr(ver, typ, be, freq=2000000000, bufsize=0):
    e = '>' if be else '<'
    return struct.pack(e + 'HHIQQ8x', ver, typ, 3, freq, bufsize)

def meta(kind, body, be):
    first = (0x80 | kind) if be else (kind << 1 | 1)
    assert len(body) <= 15
    return bytes([first]) + body + b'\0' * (15 - len(body))

def fn(typ, fid, delta, be):
    if be:
        return struct.pack('>II', typ << 28 | fid, delta)
    return struct.pack('<II', fid << 4 | typ << 1, delta)

ENTER, EXIT, TAIL, ENTER_ARGS = 0, 1, 2, 3
NEWBUF, EOB, NEWCPU, WRAP, WALL, CUSTOM, ARG, EXTENTS, TYPED, PID = range(10)

class Fdr:
    def __init__(self, ver, be):
        self.v, self.be, self.e = ver, be, '>' if be else '<'
    def m(self, kind, fmt='', *vals, payload=b''):
        return meta(kind, struct.pack(self.e + fmt, *vals) if fmt else b'', self.be) + payload
    def start(self, tid, pid, sec, usec, cpu=None, tsc=None):
        out = self.m(NEWBUF, 'i', tid) + self.m(WALL, 'QI', sec, usec)
        if self.v >= 3:
            out += self.m(PID, 'i', pid)
        if cpu is not None:
            out += self.m(NEWCPU, 'HQ', cpu, tsc)
        return out
    def f(self, typ, fid, delta):
        return fn(typ, fid, delta, self.be)
    def arg(self, v):
        return self.m(ARG, 'Q', v)
    def wrap(self, tsc):
        return self.m(WRAP, 'Q', tsc)
    def custom(self, data, tsc=0, cpu=0, delta=0):
        if self.v >= 5:
            return self.m(CUSTOM, 'ii', len(data), delta, payload=data)
        if self.v == 4:
            return self.m(CUSTOM, 'iQH', len(data), tsc, cpu, payload=data)
        return self.m(CUSTOM, 'iQ', len(data), tsc, payload=data)
    def typed(self, etype, data, delta):
        return self.m(TYPED, 'iiH', len(data), delta, etype, payload=data)
    def buffer(self, body, v1size=256, pad=b'\0'):
        if self.v >= 2:
            return self.m(EXTENTS, 'Q', len(body)) + body
        body += self.m(EOB)
        return body + pad * (v1size - len(body))   # the rest of a v1 buffer is never read

def fdr_log(ver, be, inherit=False, pad=b'\0'):
    """Two threads; thread 101 has two buffers (with inherit, the second has no NewCPUId,
    so its base TSC and CPU carry over, which llvm-xray refuses); function, argument, TSC
    wrap, custom and (v5) typed records."""
    F = Fdr(ver, be)
    # llvm-xray reads a v1 buffer's unused tail as records, so keep it 8-byte aligned there
    hello, xy = (b'hello v1', b'x y v1 !') if ver == 1 else (b'hello', b'x y')
    b1 = F.start(101, 4242, 1700000000, 500, cpu=2, tsc=1000)
    b1 += F.f(ENTER, 1, 0) + F.f(ENTER_ARGS, 2, 10) + F.arg(7) + F.arg(0xffffffffffffffff)
    b1 += F.f(EXIT, 2, 5) + F.f(ENTER, 3, 1)
    b1 += F.custom(hello, tsc=1100, cpu=2, delta=4)
    b1 += F.f(TAIL, 3, 2)
    b2 = F.start(202, 4242, 1700000000, 600, cpu=5, tsc=5000)
    b2 += F.f(ENTER, 4, 3) + F.wrap(9000000000) + F.f(EXIT, 4, 7)
    if ver >= 5:
        b2 += F.typed(9, b'ty:pe', 2) + F.f(ENTER, 1, 1) + F.f(EXIT, 1, 1)
    b3 = F.start(101, 4242, 1700000001, 100) if inherit else \
        F.start(101, 4242, 1700000001, 100, cpu=3, tsc=1200)
    b3 += F.f(ENTER, 5, 20) + F.custom(xy, tsc=1300, cpu=2, delta=1) + F.f(EXIT, 5, 3)
    b3 += F.f(EXIT, 1, 4)
    size = 256
    return hdr(ver, 1, be, bufsize=size if ver == 1 else 0) + \
        F.buffer(b1, size, pad) + F.buffer(b2, size, pad) + F.buffer(b3, size, pad)

def basic_log(ver, be):
    e = '>' if be else '<'
    def rec(typ, fid, tsc, tid, cpu=1, pid=77):
        return struct.pack(e + 'HBBiQII8x', 0, cpu, typ, fid, tsc, tid, pid)
    def arg(fid, tid, v, pid=77):
        return struct.pack(e + 'HxxiIIQ8x', 1, fid, tid, pid, v)
    body = rec(0, 1, 100, 11) + rec(3, 2, 110, 11) + arg(2, 11, 42) + rec(0, 1, 115, 12)
    body += rec(1, 2, 120, 11) + rec(1, 1, 130, 12) + rec(2, 1, 140, 11)
    return hdr(ver, 0, be, freq=1000000) + body

def ties_fdr():
    """Five threads (the merge's tournament has three empty leaves) whose records share
    TSCs across threads and within one: llvm-xray's stable sort keeps equal TSCs in its
    thread map's order."""
    F = Fdr(5, False)
    out = hdr(5, 1, False)
    for k, tid in enumerate((301, 302, 303, 304, 305)):
        b = F.start(tid, 4242, 1700000000, 100 + k, cpu=k, tsc=1000)
        b += F.f(ENTER, 1, 0) + F.f(ENTER, 2, 10) + F.f(EXIT, 2, k % 2) + F.f(EXIT, 1, 0)
        b += F.f(ENTER, 3, 5 - k % 3) + F.f(EXIT, 3, 0)
        out += F.buffer(b)
    return out

def ties_basic(ver):
    """Basic mode: threads whose records share TSCs; equal ones stay in file order."""
    def rec(typ, fid, tsc, tid):
        return struct.pack('<HBBiQII8x', 0, 1, typ, fid, tsc, tid, 77)
    body = b''
    for tsc in (100, 100, 110, 120, 120):
        for tid in (13, 11, 12):
            body += rec(0, tid - 10, tsc, tid)
    return hdr(ver, 0, False, freq=1000000) + body

def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    def w(name, data):
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)
    for v in range(1, 6):
        w('fdr-v%d.xray' % v, fdr_log(v, False))
        w('fdr-v%d-be.xray' % v, fdr_log(v, True))
    w('fdr-v1-garbage.xray', fdr_log(1, False, pad=b'\xaa'))
    w('fdr-v5-inherit.xray', fdr_log(5, False, inherit=True))
    w('fdr-v5-inherit-be.xray', fdr_log(5, True, inherit=True))
    w('fdr-v5-ties.xray', ties_fdr())
    w('basic-v3-ties.xray', ties_basic(3))
    for v in (1, 2, 3):
        w('basic-v%d.xray' % v, basic_log(v, False))
        w('basic-v%d-be.xray' % v, basic_log(v, True))
    good = fdr_log(5, False)
    F = Fdr(5, False)
    # damaged logs: each hits the first buffer (at offset 32) and leaves the others whole
    first_len = struct.unpack('<Q', good[33:41])[0]
    b1 = good[48:48 + first_len]
    rest = good[48 + first_len:]
    bad_kind = b1[:64 + 16] + meta(12, b'', False) + b1[64 + 32:]
    w('bad-kind.xray', good[:48] + bad_kind + rest)
    bad_fn = bytearray(good)
    bad_fn[48 + 64:48 + 72] = fn(ENTER, 0, 0, False)          # function id 0
    w('bad-funcid.xray', bytes(bad_fn))
    trunc = good[:32] + F.m(EXTENTS, 'Q', 20) + b1[:20] + rest   # record cut by extents
    w('bad-truncated.xray', trunc)
    w('bad-extents.xray', good + F.m(EXTENTS, 'Q', 4096) + F.start(303, 4242, 1700000002, 0, cpu=1, tsc=7) + F.f(ENTER, 1, 1))
    w('bad-header.xray', b'\x07\x00\x01\x00' + good[4:32])
    w('bad-garbage.xray', good[:48 + first_len] + b'\x55' * 40 + rest)

main()
