#!/usr/bin/env python3
"""Hand-built xtrace files for the golden tests: every token kind, both exception levels,
snapshot files with and without header, and damaged variants. Writes into this directory.
The token layout follows docs/formats/xtrace.md; this script is independent of the C writer
so that the reader is checked against a second encoder."""
import struct
import os

here = os.path.dirname(os.path.abspath(__file__))


def tok_inst(el, op):
    return bytes([0x01 | el << 6]) + struct.pack('<I', op)


def tok_pcinst(el, pc, op):
    return bytes([0x09 | el << 6]) + struct.pack('<QI', pc, op)


def tok_mem(store, addr, value):
    k = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4, 32: 5, 64: 6}[len(value)]
    return bytes([0x02 | store << 3 | k << 4]) + struct.pack('<Q', addr) + value


def tok_val(sub, v):
    return bytes([0x03 | sub << 3]) + struct.pack('<Q', v)


STXR, MRS, SVCARG, SVCRET, DC, TARGET_B = range(6)


def tok_allgpr(regs):
    return bytes([0x04 | 1 << 3]) + struct.pack('<32Q', *regs)


def tok_flags(v):
    return bytes([0x04 | 3 << 3]) + struct.pack('<Q', v)


def tok_syscall_vec(iovs):
    out = bytes([0x04 | 4 << 3]) + struct.pack('<Q', len(iovs))
    for base, ln in iovs:
        out += struct.pack('<QQ', base, ln)
    return out


def tok_time(v):
    return bytes([0x07]) + struct.pack('<Q', v)


def build():
    """Returns (instruction bytes, offsets of the two sync points)."""
    t = b''
    sync = [0]
    t += tok_pcinst(0, 0x400000, 0xd503201f)            # nop
    t += tok_inst(0, 0xaa0103e0)                        # mov x0, x1
    t += tok_inst(0, 0xf9400020)                        # ldr x0, [x1]
    t += tok_time(1000)
    t += tok_mem(0, 0x420000, struct.pack('<Q', 0x1122334455667788))
    t += tok_inst(0, 0xb9000020)                        # str w0, [x1]
    t += tok_time(1001)
    t += tok_mem(1, 0x420008, struct.pack('<I', 0xdeadbeef))
    t += tok_inst(0, 0xc85f7c20)                        # ldxr x0, [x1]
    t += tok_mem(0, 0x420010, struct.pack('<Q', 7))
    t += tok_inst(0, 0xc8027c20)                        # stxr w2, x0, [x1]
    t += tok_mem(1, 0x420010, struct.pack('<Q', 8))
    t += tok_val(STXR, 0)
    t += tok_inst(0, 0xd53b4200)                        # mrs x0, nzcv
    t += tok_val(MRS, 0x60000000)
    t += tok_inst(0, 0x9a9f17e0)                        # cset x0, eq
    t += tok_flags(0x60000000)
    t += tok_inst(0, 0xd50b7420)                        # dc zva, x0
    t += tok_val(DC, 0x420040)
    t += tok_inst(0, 0x25f90fe1)                        # whilelo p1.d, wzr, w25 (SVE)
    t += tok_inst(0, 0xa540a020)                        # ld1w (SVE)
    t += tok_mem(0, 0x420100, bytes(range(32)))
    t += tok_inst(0, 0xd503477f)                        # smstart (SME)
    t += tok_inst(0, 0x3dc00020)                        # ldr q0, [x1]
    t += tok_mem(0, 0x420200, bytes(range(16, 32)))
    t += tok_inst(0, 0xd2800808)                        # mov x8, #64
    t += tok_inst(0, 0xd4000001)                        # svc #0
    for v in (66, 1, 0x4300f0, 2, 0, 0, 0):
        t += tok_val(SVCARG, v)
    t += tok_syscall_vec([(0x430000, 12), (0x430100, 5)])
    regs = [0x1000 + i for i in range(31)] + [0x7ffff000]
    t += tok_allgpr(regs)
    t += tok_pcinst(1, 0xffff800010001000, 0xd503201f)  # kernel: nop
    t += tok_inst(1, 0xd69f03e0)                        # eret
    t += tok_val(TARGET_B, 0x400078)
    t += tok_allgpr(regs)
    sync.append(len(t))
    t += tok_pcinst(0, 0x400078, 0xd63f0020)            # blr x1
    t += tok_val(SVCRET, 17)
    t += tok_val(TARGET_B, 0x400100)
    t += tok_pcinst(0, 0x400100, 0xb4000040)            # cbz x0, +8 (taken)
    t += tok_pcinst(0, 0x400108, 0x34000040)            # cbz w0, +8 (not taken)
    t += tok_inst(0, 0x9400003f)                        # bl +0xfc
    t += tok_pcinst(0, 0x400208, 0xd65f03c0)            # ret
    t += tok_val(TARGET_B, 0x400110)
    t += tok_pcinst(0, 0x400110, 0x17fffffc)            # b -16
    t += tok_pcinst(0, 0x400100, 0xd503201f)            # nop
    t += tok_inst(0, 0x00000000)                        # udf #0
    t += tok_inst(0, 0x4ea18420)                        # add v0.4s, v1.4s, v1.4s
    t += tok_inst(0, 0x1e602820)                        # fadd d0, d1, d0
    t += tok_inst(0, 0xf8200020)                        # ldadd x0, x0, [x1]
    t += tok_mem(1, 0x420300, struct.pack('<Q', 3))
    return t, sync


def snapshot(vl, file_no, index, user, total, seed):
    V = vl // 8
    pb = vl // 64
    pslot = (pb + 15) & ~15
    out = struct.pack('<4Q', file_no, index, user, total)
    out += struct.pack('<32Q', *[seed * 0x100 + i for i in range(32)])
    for r in range(32):
        out += bytes(((r * 16 + i + seed) & 0xff) for i in range(V))
    for r in range(16):
        out += bytes(((r + i + seed) & 0xff) for i in range(pb)) + bytes(pslot - pb)
    out += bytes([0xff] * pb) + bytes(pslot - pb)
    za = bytes(V * V)
    za = bytes([seed]) + za[1:]
    out += za
    pad = (-len(out)) % 16
    out += bytes(pad)
    sysregs = [0x3000000, 0x10, 0x60000000, 0x4a0000 + seed, 0, 0x1000, 0x400040, 0x3c5,
               0x56000000, 0xffff000012345000, 0x3c0]
    out += struct.pack('<11Q', *sysregs)
    out += struct.pack('<Q', vl)
    return out


def header(version=1):
    return struct.pack('<IIQBBB', 0x50534e58, 0, version, 0, 0, 1) + bytes(5)


def main():
    t, sync = build()
    vl = 256
    snaps = snapshot(vl, 0, sync[0], 0, 0, 1) + snapshot(vl, 0, sync[1], 15, 17, 2)

    def write(name, data):
        with open(os.path.join(here, name), 'wb') as f:
            f.write(data)

    base = 'xtrace.1700000000.4242.hint9.'
    write(base + 'xinsndata.bin', t)
    write(base + 'xsnapshot.bin', header() + snaps)
    # Old trace: no header, core stream named by cpu id with hint 13.
    write('xtrace.1700000000.3.hint13.xinsndata.bin', t)
    write('xtrace.1700000000.3.hint13.xsnapshot.bin', snaps)
    # Unknown token in the first chunk: resync at the second snapshot's position.
    bad = t[:0x4c] + bytes([0x05]) + t[0x4c:]
    bsnaps = snapshot(vl, 0, 0, 0, 0, 1) + snapshot(vl, 0, sync[1] + 1, 15, 17, 2)
    write('xtrace.1.1.hint9.xinsndata.bin', bad)
    write('xtrace.1.1.hint9.xsnapshot.bin', header() + bsnaps)
    # Truncated: the file ends inside the last item.
    write('xtrace.2.1.hint9.xinsndata.bin', t[:-4])
    write('xtrace.2.1.hint9.xsnapshot.bin', header() + snaps)
    # A snapshot pointing past the end of the instruction file.
    psnaps = snaps + snapshot(vl, 0, len(t) + 100, 26, 28, 3)
    write('xtrace.3.1.hint9.xinsndata.bin', t)
    write('xtrace.3.1.hint9.xsnapshot.bin', header() + psnaps)

    # A snapshot whose instruction count disagrees with the stream (17 before it).
    csnaps = snapshot(vl, 0, sync[0], 0, 0, 1) + snapshot(vl, 0, sync[1], 15, 99, 2)
    write('xtrace.4.1.hint9.xinsndata.bin', t)
    write('xtrace.4.1.hint9.xsnapshot.bin', header() + csnaps)


main()
