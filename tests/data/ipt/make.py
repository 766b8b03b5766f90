#!/usr/bin/env python3
"""Writes the small Intel PT inputs of the golden tests (hand-encoded from the SDM
layouts, one of every packet kind and IP compression)."""
import struct

PSB = bytes([2, 0x82] * 8)
PSBEND = b'\x02\x23'

def ip(op, ipc, v):
    n = {0: 0, 1: 2, 2: 4, 3: 6, 4: 6, 6: 8}[ipc]
    return bytes([op | ipc << 5]) + v.to_bytes(8, 'little')[:n]

def tsc(v):
    return b'\x19' + v.to_bytes(7, 'little')

def all_kinds():
    b = PSB + tsc(0x1122334455) + b'\x02\x03\x2a\x00' + b'\x99\x01'
    b += ip(0x1d, 6, 0x7fff12345678) + PSBEND
    b += ip(0x11, 3, 0x0000000401000)        # tip.pge sext48
    b += b'\x1a' + b'\x02\xa3' + (0b1 << 10 | 0b1011001101).to_bytes(6, 'little')
    b += ip(0x0d, 1, 0x1234) + ip(0x0d, 2, 0x00401234) + ip(0x0d, 4, 0x7fff00001000)
    b += ip(0x0d, 3, 0xffff80000010) + ip(0x0d, 0, 0)
    b += b'\x02\x43' + ((0x1234000 >> 5) << 1 | 1).to_bytes(6, 'little')   # pip nr
    b += b'\x02\xc8' + (0xabcde).to_bytes(5, 'little')                     # vmcs
    b += b'\x59\x7f' + b'\x02\x73\x34\x12\x00\x55\x01'                     # mtc, tma
    b += b'\x03' + b'\x0f\x81\x02'                                         # cyc, cyc ext
    b += b'\x99\x21' + b'\x99\x06'                                         # mode.tsx, mode.exec
    b += b'\x02\xc3\x88' + (0x1122334455667788).to_bytes(8, 'little')      # mnt
    b += b'\x02\x62\x02\xe2'                                               # exstop, exstop ip
    b += b'\x02\xc2' + struct.pack('<II', 0x20, 0x1)                       # mwait
    b += b'\x02\x22\x08\x21' + b'\x02\xa2\x21\x01\x00\x00\x00'             # pwre, pwrx
    b += b'\x02\x12' + struct.pack('<I', 0xcafe) + b'\x02\xb2' + struct.pack('<Q', 0xfeedface12)
    b += b'\x02\x13\x81\x0e' + b'\x02\x13\x02\x00' + b'\x02\x53\x00' + (0xdead000).to_bytes(8, 'little')
    b += b'\xd9\xe0\x05\x34\x12' + b'\x02\x63\x85' + b'\x0c\xef\xbe\xad\xde' + b'\x02\xb3'
    b += ip(0x01, 0, 0) + b'\x02\xf3' + ip(0x1d, 6, 0x401000) + b'\x00\x00' + b'\x02\x83'
    return b

def main():
    a = all_kinds()
    open('all.pt', 'wb').write(a)
    # A bad opcode and a bad payload, each followed by a PSB to resync at.
    c = a[:40] + b'\xc9' + a[40:70] + PSB + PSBEND + b'\x99\xe0' + PSB + PSBEND + b'\x02\x04'
    open('corrupt.pt', 'wb').write(c)
    open('truncated.pt', 'wb').write(a + b'\x02\xc3\x88\x01\x02')
    # Starts in the middle of a packet (the tail of a TSC), then a PSB.
    open('midpacket.pt', 'wb').write(b'\x33\x44\x55' + a)

main()
