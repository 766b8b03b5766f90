#!/usr/bin/env python3
"""Splice Intel PT corner cases into a real trace and write what decoding each must give.

    ptsplice.py TRACE.pt DUMP LISTING OUTDIR

TRACE.pt is a recorded branch trace converted with --no-retcomp (every return a TIP), DUMP
`tracekit dump` of it, LISTING its `tracekit decode` listing (with disassembly). Each TIP
packet is matched with the instruction that used it (indirect jumps and calls, returns
and far transfers, in listing order; a TIP right after a FUP is an interrupt's). Writes
NAME.pt and NAME.expected (the listing decode must print) for:

  tsx    MODE.TSX(abort) + FUP + TIP after some TIPs, at and to the TIP's target: the
         abort's branch goes where the flow goes on, so the listing is the original one
         with [aborted] and the interrupt after the instruction that used the TIP
  et     Event Trace page faults (EVD CR2, CFE INTR, FUP + TIP) likewise: the listing is
         the original one with [interrupt 14, cr2: ...] and the interrupt
  defer  some TIPs of indirect calls and jumps moved after the TNT packet that follows
         them: the same listing
  eosN   the trace cut after a TIP: the listing up to the instruction that used it,
         then [end of trace]
  ovf    an OVF after the FUP of a PSB+ (the rest of the PSB+ dropped), then a FUP at the
         same IP: the listing with [overflow at offset 0x...] where the PSB+ was
  query  after some TIPs whose target leads straight to a conditional branch, a second
         TIP to the same target: the conditional branch fails (a TIP where a TNT is due),
         decoding goes on at that TIP, so the instructions from the target on come again
  nomap  before some TIPs, a TIP to an address without code: decoding goes on at the
         real TIP after the error, so the listing is the original one with the error
  loop   before some TIPs, a TIP to 0x10 (where the decoder is given nop; jmp 0x10) and a
         TNT: no conditional branch can use its outcome, an error at the TNT, and decoding
         goes on at the real TIP: the listing is the original one with the errors
"""
import re
import struct
import sys

trace = open(sys.argv[1], 'rb').read()
dump = [l.split() for l in open(sys.argv[2]) if l.strip()]
listing = open(sys.argv[3]).read().splitlines()
out = sys.argv[4]

pkts = [(int(d[0], 16), d[1]) for d in dump]          # (offset, kind)
ends = [o for o, _ in pkts[1:]] + [len(trace)]

# TIP packets the flow uses, in order (not in PSB+, not an interrupt's)
tips, in_psb, after_fup = [], False, False
for i, (off, kind) in enumerate(pkts):
    if kind == 'psb':
        in_psb = True
    elif kind == 'psbend':
        in_psb = False
    elif not in_psb and kind == 'tip' and not after_fup:
        tips.append(i)
    if kind in ('fup', 'tip', 'tip.pge', 'tip.pgd', 'tnt.8', 'tnt.64'):
        after_fup = kind == 'fup' and not in_psb

INSN = re.compile(r'^([0-9a-f]{16})  (.*)$')


def uses_tip(text, nxt):
    words = [w for w in text.split() if w not in ('bnd', 'notrack', 'rep', 'repz')]
    if not words:
        return None
    m, ops = words[0], ' '.join(words[1:])
    if nxt.startswith('[disabled]') or nxt.startswith('[end of trace]'):
        return None                                    # a TIP.PGD's, or no packet
    if m in ('ret', 'iret', 'iretq', 'sysret', 'sysretq', 'jmp far', 'retf'):
        return 'ret'
    if m in ('jmp', 'call') and not ops.startswith('0x'):
        return m
    return None


consumers = []                                         # (listing index, kind)
for k, line in enumerate(listing):
    mt = INSN.match(line)
    if mt:
        kind = uses_tip(mt.group(2), listing[k + 1] if k + 1 < len(listing) else '')
        if kind:
            consumers.append((k, kind))
if len(consumers) != len(tips):
    sys.exit(f'ptsplice: {len(tips)} TIPs but {len(consumers)} instructions that use one')


def target(k):
    """Address of the first instruction after listing line K."""
    for line in listing[k + 1:]:
        mt = INSN.match(line)
        if mt:
            return int(mt.group(1), 16)
    return None


def sext48(op, ip):
    return bytes([(3 << 5) | op]) + struct.pack('<Q', ip)[:6]


def write(name, data, lines):
    open(f'{out}/{name}.pt', 'wb').write(data)
    open(f'{out}/{name}.expected', 'w').write(''.join(l + '\n' for l in lines))


def spread(cands, n):
    step = max(1, len(cands) // n)
    return cands[step // 2::step][:n]


# tsx: aborts after every so many TIPs
sites = spread([(i, c) for i, c in zip(tips, consumers) if target(c[0]) is not None], 25)
data, lines, last, extra = bytearray(), list(listing), 0, 0
for i, (k, _) in sites:
    t = target(k)
    data += trace[last:ends[i]] + bytes([0x99, 0x22]) + sext48(0x1d, t) + sext48(0x0d, t)
    last = ends[i]
    lines[k + 1 + extra:k + 1 + extra] = ['[aborted]', f'[interrupt: {t:016x} -> {t:016x}]']
    extra += 2
write('tsx', bytes(data + trace[last:]), lines)

# et: Event Trace page faults (EVD CR2 + CFE INTR 14 + FUP + TIP) at and to some TIPs'
# targets, in other places than the aborts: the listing is the original one with the
# event and the interrupt after the instruction that used the TIP
sites_et = spread([(i, c) for i, c in zip(tips, consumers) if target(c[0]) is not None], 26)[1::2]
data, lines, last, extra = bytearray(), list(listing), 0, 0
for n, (i, (k, _)) in enumerate(sites_et):
    t, cr2 = target(k), 0x7f0000001000 + 0x1000 * n
    data += (trace[last:ends[i]] + bytes([0x02, 0x53, 0x00]) + struct.pack('<Q', cr2) +
             bytes([0x02, 0x13, 0x01, 14]) + sext48(0x1d, t) + sext48(0x0d, t))
    last = ends[i]
    lines[k + 1 + extra:k + 1 + extra] = [f'[interrupt 14, cr2: {cr2:016x}]',
                                          f'[interrupt: {t:016x} -> {t:016x}]']
    extra += 2
write('et', bytes(data + trace[last:]), lines)

# defer: TIP and the TNT-8 right after it swapped, for indirect calls and jumps
cands = [i for i, (k, kind) in zip(tips, consumers)
         if kind in ('jmp', 'call') and i + 1 < len(pkts) and pkts[i + 1][1] == 'tnt.8' and
         ends[i] == pkts[i + 1][0] and (i + 2 >= len(pkts) or pkts[i + 2][1] != 'tnt.8')]
if len(cands) < 5:
    sys.exit(f'ptsplice: only {len(cands)} indirect branches with a TNT after their TIP')
data, last = bytearray(), 0
for i in spread(cands, 25):
    tip, tnt = trace[pkts[i][0]:ends[i]], trace[ends[i]:ends[i + 1]]
    data += trace[last:pkts[i][0]] + tnt + tip
    last = ends[i + 1]
write('defer', bytes(data + trace[last:]), listing)

# eos: cuts after TIPs
for n, (i, (k, _)) in enumerate(spread(list(zip(tips, consumers)), 3)):
    write(f'eos{n}', trace[:ends[i]], listing[:k + 1] + ['[end of trace]'])

# ovf: in the PSB+ of the second PSB with a FUP
psbs = [i for i, (_, kind) in enumerate(pkts) if kind == 'psb']
for p in psbs[1:]:
    j = p
    while pkts[j][1] not in ('fup', 'psbend'):
        j += 1
    if pkts[j][1] != 'fup':
        continue
    e = j
    while pkts[e][1] != 'psbend':
        e += 1
    fup = trace[pkts[j][0]:ends[j]]
    ovf_at = ends[j]
    # the FUP is sent whole in PSB+; the same bytes again give the same IP
    data = trace[:ovf_at] + bytes([0x02, 0xf3]) + fup + trace[ends[e]:]
    open(f'{out}/ovf.pt', 'wb').write(data)
    open(f'{out}/ovf.at', 'w').write(f'{ovf_at:x}\n')
    break
else:
    sys.exit('ptsplice: no PSB+ with a FUP after the first')


def mnemonic(line):
    mt = INSN.match(line)
    words = [w for w in mt.group(2).split() if w not in ('bnd', 'notrack')] if mt else []
    return (words[0], ' '.join(words[1:])) if words else (None, '')


def straight_to_jcc(k):
    """Listing index of the conditional branch reached from line K's target with no
    other trace used on the way (only direct jumps and calls), or None."""
    for m in range(k + 1, min(k + 40, len(listing))):
        op, ops = mnemonic(listing[m])
        if op is None:
            return None                                # an event line
        if op.startswith('j') and op != 'jmp':
            return m
        if op in ('jmp', 'call') and not ops.startswith('0x'):
            return None
        if op.startswith(('ret', 'iret', 'sys', 'int', 'loop', 'ud', 'hlt', 'xbegin', 'xabort')):
            return None
    return None


# query: a TIP (full IP) to the same target right after the one a branch used
qsites = [(i, k, m) for i, (k, _) in zip(tips, consumers)
          if target(k) is not None and (m := straight_to_jcc(k)) is not None]
if len(qsites) < 5:
    sys.exit(f'ptsplice: only {len(qsites)} TIPs followed straight by a conditional branch')
data, lines, last, extra = bytearray(), list(listing), 0, 0
for i, k, m in spread(qsites, 25):
    data += trace[last:ends[i]]
    err = f'[error: decode error, 0 bytes skipped at offset 0x{len(data):x}]'
    data += sext48(0x0d, target(k))
    last = ends[i]
    lines[m + 1 + extra:m + 1 + extra] = [err] + listing[k + 1:m + 1]
    extra += 1 + m - k
write('query', bytes(data + trace[last:]), lines)

# nomap: a TIP to 0x10 (no code) before the TIP a branch uses, which is sent in full again
data, lines, last, extra = bytearray(), list(listing), 0, 0
for i, (k, _) in spread([(i, c) for i, c in zip(tips, consumers) if target(c[0]) is not None], 25):
    data += trace[last:pkts[i][0]] + sext48(0x0d, 0x10)
    err = f'[error: no code in the image at 0000000000000010 at offset 0x{len(data):x}]'
    data += sext48(0x0d, target(k))
    last = ends[i]
    lines[k + 1 + extra:k + 1 + extra] = [err]
    extra += 1
write('nomap', bytes(data + trace[last:]), lines)
# loop: a TIP into a loop of direct jumps and a TNT before the TIP a branch uses
data, lines, last, extra = bytearray(), list(listing), 0, 0
for i, (k, _) in spread([(i, c) for i, c in zip(tips, consumers) if target(c[0]) is not None], 25):
    data += trace[last:pkts[i][0]] + sext48(0x0d, 0x10)
    err = f'[error: decode error, 0 bytes skipped at offset 0x{len(data):x}]'
    data += bytes([0x06]) + sext48(0x0d, target(k))   # TNT-8 (one outcome: taken)
    last = ends[i]
    lines[k + 1 + extra:k + 1 + extra] = [err]
    extra += 1
write('loop', bytes(data + trace[last:]), lines)
open(f'{out}/loop.bin', 'wb').write(bytes([0x90, 0xeb, 0xfd]))   # nop; jmp 0x10
print(f'ptsplice: {len(sites)} aborts, {len(sites_et)} page faults, {min(len(cands), 25)} deferred TIPs, 3 cuts, 1 overflow,'
      f' 25 TIPs that do not fit, 25 without code, 25 TNTs without a branch')
