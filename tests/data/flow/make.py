#!/usr/bin/env python3
"""Write the small Intel PT inputs of the flow golden tests: code.bin (loaded with
--raw code.bin:0x1000) and one .pt stream per event kind. Run from this directory."""
import struct

code = bytearray(b'\xcc' * 0x60)
def put(addr, b):
    code[addr - 0x1000:addr - 0x1000 + len(b)] = b
put(0x1000, bytes([0x31, 0xc0]))                    # xor eax, eax
put(0x1002, bytes([0x83, 0xf8, 0x01]))              # cmp eax, 1
put(0x1005, bytes([0x74, 0x02]))                    # jz 0x1009
put(0x1007, bytes([0xeb, 0x03]))                    # jmp 0x100c
put(0x1009, bytes([0x90, 0x90, 0x90]))              # nop x3
put(0x100c, bytes([0xe8, 0x0f, 0x00, 0x00, 0x00]))  # call 0x1020
put(0x1011, bytes([0xff, 0xe0]))                    # jmp rax
put(0x1020, bytes([0x90, 0xc3]))                    # nop; ret
put(0x1030, bytes([0x0f, 0x05]))                    # syscall
put(0x1032, bytes([0xc3]))                          # ret
put(0x1040, bytes([0x90, 0x90, 0xeb, 0xfc]))        # nop; nop; jmp 0x1040
put(0x1050, bytes([0xff, 0xc9, 0x75, 0xfc]))        # dec ecx; jnz 0x1050
put(0x1054, bytes([0xff, 0xe0]))                    # jmp rax
open('code.bin', 'wb').write(code)

PSB = bytes([0x02, 0x82] * 8)
PSBEND = bytes([0x02, 0x23])
def mode64(): return bytes([0x99, 0x01])
def ip(op, addr):  # 48-bit sign-extended compression
    return bytes([(3 << 5) | op]) + struct.pack('<Q', addr)[:6]
def pge(a): return ip(0x11, a)
def tip(a): return ip(0x0d, a)
def fup(a): return ip(0x1d, a)
def pgd(a=None): return bytes([0x01]) if a is None else ip(0x01, a)
def tnt(bits):  # bits: string of 0/1, oldest first
    n = len(bits)
    return bytes([(1 << (n + 1)) | (int(bits, 2) << 1)])
def tsc(v): return bytes([0x19]) + struct.pack('<Q', v)[:7]
OVF = bytes([0x02, 0xf3])
def pip(cr3): return bytes([0x02, 0x43]) + struct.pack('<Q', (cr3 >> 5) << 1)[:6]
def cbr(r): return bytes([0x02, 0x03, r, 0x00])
def tsx(intx, abrt): return bytes([0x99, 0x20 | intx | abrt << 1])
def tma(ctc, fc): return bytes([0x02, 0x73, ctc & 0xff, ctc >> 8, 0, fc & 0xff, fc >> 8])
def mtc(c): return bytes([0x59, c])
def cyc(v): return bytes([(v << 3) | 0x03])   # short form: v < 32
def psbplus(at=None, t=0x1000):
    return PSB + tsc(t) + mode64() + (fup(at) if at is not None else b'') + PSBEND

# the main path: enable at 0x1000, jz not taken, call, ret compressed, jmp rax -> syscall
basic = psbplus() + mode64() + pge(0x1000) + tnt('01') + tip(0x1030) + pgd()
streams = {
    'basic': basic,
    # tracing off around the syscall and back on after it
    'syscall': psbplus() + mode64() + pge(0x1030) + pgd() + mode64() + pge(0x1032) + tip(0x1000)
               + tnt('1') + pgd(),
    # interrupt (FUP + TIP) before the nop at 0x100a, handler returns there
    'interrupt': psbplus() + mode64() + pge(0x1000) + tnt('1') + fup(0x100a) + tip(0x1020)
                 + tip(0x100a) + tnt('1') + tip(0x1030) + pgd(),
    # asynchronous disable (FUP + TIP.PGD) at 0x1009
    'async-disable': psbplus() + mode64() + pge(0x1000) + tnt('1') + fup(0x1009) + pgd(),
    # overflow in mid-stream; tracing resumes at the FUP
    'overflow': psbplus() + mode64() + pge(0x1000) + tnt('0') + OVF + fup(0x1020) + tip(0x1011)
                + tip(0x1030) + pgd(),
    # paging, TSX, CBR events; a second PSB+ in the middle
    'events': psbplus() + pip(0x12345000) + cbr(0x20) + mode64() + pge(0x1000) + tnt('0')
              + tsx(1, 0) + fup(0x100c) + psbplus(0x1020, 0x2000) + tip(0x1011)
              + tsx(0, 0) + fup(0x1011) + tip(0x1030) + pgd(),
    # code missing from the image: a gap, then decoding resumes at the next TIP
    'no-image': psbplus() + mode64() + pge(0x1000) + tnt('01') + tip(0x9000) + tnt('101')
                + tip(0x1030) + pgd(),
    # garbage in the middle: error, resync at the next PSB
    'bad-packet': psbplus() + mode64() + pge(0x1000) + tnt('0') + bytes([0x02, 0xff, 0x55])
                  + psbplus(0x1020, 0x3000) + tip(0x1011) + tip(0x1030) + pgd(),
    # a run of TNT-8 packets whose sixth outcome leaves the loop for an indirect jump
    # while the third packet is left: the jump takes the TIP after it (a deferred TIP,
    # as libipt), the syscall there finds TNT where it needs a TIP: the error names the
    # third packet (offset 0x27), the one holding the first unused outcome
    'tnt-run-error': psbplus() + mode64() + pge(0x1050) + tnt('111111') + tnt('111110')
                     + tnt('111111') + tip(0x1030) + pgd(),
    # timing: TSC + TMA + CBR in PSB+, then MTC and CYC between the branches
    'timing': PSB + tsc(0x10000) + tma(0x100, 0x20) + cbr(20) + mode64() + PSBEND + mode64()
              + pge(0x1000) + cyc(10) + mtc(0x21) + tnt('0') + cyc(20) + tip(0x1030) + mtc(0x23)
              + cyc(4) + pgd(),
    # every return a TIP, as a branch trace records them (convert --to ipt compresses the
    # two that return to their call; the one after the syscall has no call before it)
    'retcomp': psbplus() + mode64() + pge(0x1000) + tnt('0') + tip(0x1011) + tip(0x1050)
               + tnt('110') + tip(0x1030) + pgd() + mode64() + pge(0x1032) + tip(0x1000)
               + tnt('1') + tip(0x1011) + tip(0x1030) + pgd(),
}
for name, data in streams.items():
    open(name + '.pt', 'wb').write(data)
