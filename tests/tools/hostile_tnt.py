#!/usr/bin/env python3
"""A hostile Intel PT stream for the text output's budget: DIR/loop.bin (30 nops and a jnz
back, load it at 0x1000) and DIR/hostile.pt, 32 KiB of TNT-8 packets (six taken outcomes
each) between PSBs, so each 4 KiB chunk decodes to ~12 MB of text.
Usage: hostile_tnt.py DIR"""
import struct
import sys

d = sys.argv[1]
open(d + '/loop.bin', 'wb').write(b'\x90' * 30 + b'\x75\xe0')   # 30 nops; jnz back
PSB = bytes([0x02, 0x82] * 8)


def ip(op, a):
    return bytes([(3 << 5) | op]) + struct.pack('<Q', a)[:6]


def psbplus(fup=None):
    return PSB + b'\x99\x01' + (ip(0x1d, fup) if fup is not None else b'') + b'\x02\x23'


out = bytearray(psbplus() + b'\x99\x01' + ip(0x11, 0x1000))
while len(out) < 32 << 10:
    out += b'\xfe' * 4000 + psbplus(0x1000)      # TNT-8: six taken outcomes
open(d + '/hostile.pt', 'wb').write(out)
