#!/usr/bin/env python3
"""Write a perf.data file holding Intel PT, as `perf record -e intel_pt//u` does: the
intel_pt event's attr, PERF_RECORD_AUXTRACE_INFO, an MMAP2 record per executable segment
of each module, and the trace of each queue in PERF_RECORD_AUXTRACE buffers (data inline,
padded to 8 bytes) with a PERF_RECORD_AUX after each. For tests: the machine has no PT.

usage: mkperf.py OUT --queue CPU:TID:PTFILE [...] [--module PATH:BIAS[:BUILDID] ...] [--buffer N]
                 [--packets FILE] [--drop K] [--pid P] [--snapshot SIZE:STEP] [--tsc-hz HZ]
                 [--per-thread] [--kernel ADDR[:BUILDID]] [--threads N] [--timed]
                 [--time-zero NS] [--migrate CPU,CPU...] [--session SPEC] [--lose K]
  --buffer N   bytes per buffer (default 4096)
  --packets F  the packet offsets of the PT files (`tracekit dump` output: offset first):
               buffers then end at a packet boundary, as the hardware's output stops
               after a whole packet when the kernel collects it
  --drop K     leave out buffer K of the first queue (0-based): trace lost in between
  BUILDID      hex: the MMAP2 records carry it (PERF_RECORD_MISC_MMAP_BUILD_ID)
  --vdso ADDR:BUILDID   an MMAP2 record of the kernel's [vdso] at ADDR (two pages)
  --tsc-hz HZ  the TSC's frequency, given as perf gives it (time_shift and time_mult in
               AUXTRACE_INFO: ns = ticks * mult >> shift); none by default
  --timed      a session perf decodes by time, as real ones are: cap_user_time_zero set,
               the TSC's conversion (--tsc-hz, else 1 tick = 1 ns: shift 31, mult 2^31),
               each AUXTRACE's reference a TSC after its buffer's last TSC packet, and the
               sideband records' times (sample_id_all) on the TSC's timeline: the mappings
               and a COMM before the first TSC, each AUX at its buffer's reference.
               Needs --packets (whose lines give the TSC packets' values)
  --time-zero NS  with --timed: perf's time_zero (ns = time_zero + ticks converted)
  --migrate CPUS  with --timed: the one queue's thread migrates between CPUs (a list such
               as 0,3,0): its trace is cut at PSBs into as many pieces, each run on its
               CPU (one queue per CPU); each piece but the last closes with FUP + TIP.PGD
               at the IP where the next one begins (its PSB+'s FUP), as the kernel's
               switch leaves it, and PERF_RECORD_SWITCH records (out and in, timed around
               the piece's TSCs) tell perf which thread ran where
  --session SPEC  a timed session of several processes and threads (implies --timed;
               --queue, --module, --packets not used), SPEC a JSON file:
                 {"cpu": 0, "slices": 3,
                  "procs": [{"pid": P, "comm": NAME, "modules": ["PATH:BIAS", ...]},
                            {"pid": Q, "parent": P, "comm": NAME, "modules": [...]}, ...],
                  "threads": [{"pid": P, "tid": T, "pt": PTFILE, "packets": DUMP,
                               "copies": N}, ...]}
               ("copies": the thread runs its trace N times, for large sessions)
               each process's exec (COMM) and code (MMAP2), a process with a parent
               forked from it first (FORK) then exec'ing its own program; each thread
               not its process's first created by a FORK. Each thread's trace is cut at
               PSBs (with a FUP) into SLICES pieces, and the pieces run on the one CPU in
               turn (slice 1 of every thread, then slice 2, ...): each closed with FUP +
               TIP.PGD where its next one begins, its TSC packets moved onto one clock
               that goes forward, PERF_RECORD_SWITCH_CPU_WIDE records (out and in)
               between them, EXIT records at the end. With --per-thread: a queue per
               thread holding its whole trace, no switches. For large traces DUMP may
               keep only the psb, psbend, fup and tsc lines and the line before each
               psb (buffers then end at those packets)
  --cpuid S    the processor as perf records it (HEADER_CPUID), e.g. GenuineIntel,6,142,10
  --lose K     the kernel's buffer was full: buffer K of the first queue lost (its
               PERF_RECORD_AUX flagged truncated, no AUXTRACE) and the trace after it up to
               the next PSB, where the hardware starts again
  --per-thread  buffers per thread (perf record --per-thread): queues given as -1:TID:PTFILE
  --kernel ADDR[:BUILDID]  the kernel traced too (perf record -e intel_pt//): the attr
               without exclude_kernel, and perf's record of the kernel map,
               "[kernel.kallsyms]_text" with _text's run-time address ADDR (an MMAP record;
               an MMAP2 carrying BUILDID when given), then a module's map
  --threads N  perf record --threads=N: OUT is a directory, OUT/data holds the header and
               AUXTRACE_INFO, OUT/data.K the module maps (K = 0) and the buffers of the
               queues whose index is K modulo N, as perf's writer threads split them
  --snapshot SIZE:STEP  snapshot mode (perf record -S): a snapshot every STEP bytes of trace
               (at the next packet boundary with --packets), each holding the SIZE bytes
               before it, as a ring buffer of SIZE bytes would; SIZE > STEP: they overlap,
               SIZE < STEP: trace between them is never kept; STEP @E1,E2,...: snapshots
               taken when the trace reaches those offsets (and at its end)
Layout: the kernel's include/uapi/linux/perf_event.h and tools/perf/util/header.h."""
import argparse
import bisect
import json
import os
import struct

PMU_TYPE = 8                      # the intel_pt PMU's type number (sysfs gives it)
ATTR_SIZE = 128                   # PERF_ATTR_SIZE_VER7
REC_MMAP, REC_LOST, REC_COMM, REC_EXIT, REC_FORK, REC_MMAP2, REC_AUX = 1, 2, 3, 4, 7, 10, 11
REC_ITRACE_START, REC_SWITCH, REC_SWITCH_CPU_WIDE = 12, 14, 15
AUX_TRUNCATED = 1
REC_AUXTRACE_INFO, REC_AUXTRACE = 70, 71
MISC_KERNEL, MISC_USER = 1, 2
MISC_COMM_EXEC = 0x2000
MISC_SWITCH_OUT = 0x2000
# config: pt, tsc, branch enable, mtc period 3 (tools/perf's intel_pt format)
SAMPLE_TYPE = 1 | 2 | 4 | 128 | 65536   # ip, tid, time, cpu, identifier
EVENT_ID = 1
CONFIG = (1 << 0) | (1 << 10) | (1 << 13) | (3 << 14)


def rec(rtype, misc, body):
    return struct.pack('<IHH', rtype, misc, 8 + len(body)) + body


def sample_id(pid, tid, time, cpu):
    """The fields sample_id_all appends to the kernel's records: tid, time, cpu, id."""
    return struct.pack('<IIQIIQ', pid, tid, time, cpu, 0, EVENT_ID)


def exec_segments(path):
    """(p_vaddr, p_offset, p_memsz) of the executable PT_LOAD segments of an ELF64 file."""
    with open(path, 'rb') as f:
        data = f.read(1 << 16)
    phoff, = struct.unpack_from('<Q', data, 0x20)
    phentsize, phnum = struct.unpack_from('<HH', data, 0x36)
    segs = []
    for i in range(phnum):
        p_type, p_flags, p_offset, p_vaddr, _, _, p_memsz, _ = struct.unpack_from(
            '<IIQQQQQQ', data, phoff + i * phentsize)
        if p_type == 1 and p_flags & 1:
            segs.append((p_vaddr, p_offset, p_memsz))
    return segs


def module_maps(m, pid, time):
    """The MMAP2 records of module argument M (PATH:BIAS[:BUILDID]) in process PID at TIME:
    one per executable segment."""
    bid, out = None, bytearray()
    if m.count(':') >= 2 and not m.rsplit(':', 1)[1].startswith('0x'):
        m, bid = m.rsplit(':', 1)
        bid = bytes.fromhex(bid)
    path, bias = m.rsplit(':', 1)
    bias = int(bias, 0)
    for vaddr, off, memsz in exec_segments(path):
        addr = (bias + vaddr) & ~0xfff
        pgoff = off & ~0xfff
        length = (bias + vaddr + memsz - addr + 0xfff) & ~0xfff
        name = path.encode() + b'\0'
        name += b'\0' * (-len(name) % 8)
        if bid is None:      # device and inode (zero), or the build-id
            ident = struct.pack('<IIQQ', 0, 0, 0, 0)
        else:
            ident = struct.pack('<B3x', len(bid)) + bid.ljust(20, b'\0')
        body = struct.pack('<IIQQQ', pid, pid, addr, length, pgoff) + ident + \
            struct.pack('<II', 5, 2) + name + sample_id(pid, pid, time, 0)  # r-x, private
        out += rec(REC_MMAP2, MISC_USER | (0x4000 if bid else 0), body)
    return bytes(out)


def comm(pid, tid, name, time):
    """PERF_RECORD_COMM of an exec (comm_exec): the program's new name."""
    name = name.encode()[:15] + b'\0'
    name += b'\0' * (-len(name) % 8)
    return rec(REC_COMM, MISC_COMM_EXEC, struct.pack('<II', pid, tid) + name +
               sample_id(pid, tid, time, 0))


def psb_starts(lines):
    """The PSBs of a trace (`tracekit dump` lines) whose PSB+ has a FUP (tracing on there):
    (offset, the IP); not where that IP is the target of the TIP just before (the thread
    ran no instruction there): perf 6.1 then runs on past a FUP + TIP.PGD at that IP to the
    next branch, where libipt, as the SDM says, stops at it."""
    starts = []
    for i, w in enumerate(lines):
        if len(w) >= 2 and w[1] == 'psb' and i > 0:
            for v in lines[i + 1:i + 8]:
                if v[1] == 'psbend':
                    break
                if v[1] == 'fup' and not (lines[i - 1][1].startswith('tip') and
                                          lines[i - 1][-1][-8:] == v[-1][-8:]):
                    # bytes the FUP leaves out are the last IP's, zero after a PSB
                    starts.append((int(w[0], 16), int(v[-1].replace('?', '0'), 16)))
    return starts


def dump_lines(path):
    with open(path) as f:
        return [line.split() for line in f]


def packet_offsets(lines):
    return sorted({int(w[0], 16) for w in lines
                   if w and all(c in '0123456789abcdef' for c in w[0])})


def tsc_packets(lines):
    return [(int(w[0], 16), int(w[2], 16)) for w in lines if len(w) >= 3 and w[1] == 'tsc']


def repeat(pt, lines, n):
    """A thread's trace PT (starting with a PSB) run N times end to end, and its dump
    LINES: each copy's packets at its offset, its TSCs after the copy before's (the
    session writes their values into the trace when it moves them onto its clock)."""
    tscs = tsc_packets(lines)
    span = tscs[-1][1] - tscs[0][1] + 1000 if tscs else 0
    out = []
    for k in range(n):
        for w in lines:
            if not w or not all(c in '0123456789abcdef' for c in w[0]):
                continue
            v = ['%016x' % (int(w[0], 16) + k * len(pt))] + w[1:]
            if len(w) >= 3 and w[1] == 'tsc':
                v[2] = '%x' % (int(w[2], 16) + k * span)
            out.append(v)
    return pt * n, out


def session(a, perf_time_of):
    """--session SPEC: processes and threads (see the usage). Returns the sideband records
    (before the trace), the streams as main() takes them, each thread's pid, and the
    sideband after the trace (the exits)."""
    with open(a.session) as f:
        spec = json.load(f)
    cpu, nslices = spec.get('cpu', 0), spec.get('slices', 3)
    threads = spec['threads']
    pid_of = {t['tid']: t['pid'] for t in threads}
    # each thread's trace cut at PSBs with a FUP into NSLICES pieces, as migrate() does
    pieces = {}
    for t in threads:
        with open(t['pt'], 'rb') as f:
            pt = f.read()
        lines = dump_lines(t['packets'])
        if t.get('copies', 1) > 1:
            pt, lines = repeat(pt, lines, t['copies'])
        starts = psb_starts(lines)
        if len(starts) < nslices - 1:
            raise SystemExit('--session: too few PSBs with a FUP in ' + t['pt'])
        picks = [starts[(k + 1) * len(starts) // nslices - 1] for k in range(nslices - 1)]
        edges = [0] + [o for o, _ in picks] + [len(pt)]
        offs, tscs = packet_offsets(lines), tsc_packets(lines)
        toffs = [o for o, _ in tscs]

        def within(xs, keys, k):
            # the items of XS (sorted by KEYS) in piece K, relative to its start
            lo, hi = bisect.bisect_left(keys, edges[k]), bisect.bisect_left(keys, edges[k + 1])
            return xs[lo:hi]
        pieces[t['tid']] = [(pt[edges[k]:edges[k + 1]],
                             [o - edges[k] for o in within(offs, offs, k)],
                             [(o - edges[k], v) for o, v in within(tscs, toffs, k)],
                             picks[k][1] if k < nslices - 1 else None)
                            for k in range(nslices)]
    # the CPU's timeline: slice k of each thread in turn; each piece's TSC packets moved
    # onto one clock that only goes forward, GAP ticks between pieces (the switch)
    gap = 1000
    first = min(v for p in pieces.values() for _, _, ts, _ in p for _, v in ts)
    # not before 10^6 ticks: the sideband before the trace needs times after perf's
    # time_zero (perf turns them into TSCs without a sign: one before would be after all)
    first = max(first, 10**6)
    now = first - gap
    if a.per_thread:
        streams = []
        for t in threads:
            s, so, st = bytearray(), [], []
            for piece, po, pts, nxt in pieces[t['tid']]:
                base = len(s)
                s += piece
                so += [o + base for o in po]
                st += [(o + base, v) for o, v in pts]
            streams.append((0xffffffff, t['tid'], bytes(s), so, st))
        switches = []
    else:
        s, so, st, switches = bytearray(), [], [], []
        prev = (0, 0)            # the idle task (swapper) before the first
        for k in range(nslices):
            for t in threads:
                piece, po, pts, nxt = pieces[t['tid']][k]
                piece = bytearray(piece)
                delta = now + gap - pts[0][1]
                for o, v in pts:
                    piece[o + 1:o + 8] = struct.pack('<Q', v + delta)[:7]
                base = len(s)
                s += piece
                so += [o + base for o in po]
                st += [(o + base, v + delta) for o, v in pts]
                if nxt is not None:
                    # switched out: FUP at the IP where its next piece begins, TIP.PGD
                    so += [len(s), len(s) + 7]
                    s += bytes([0x7d]) + struct.pack('<Q', nxt)[:6] + bytes([0x01])
                cur = (t['pid'], t['tid'])
                switches.append((pts[0][1] + delta - gap // 2, prev, cur))
                prev, now = cur, pts[-1][1] + delta
        switches.append((now + gap // 2, prev, (0, 0)))
        streams = [(cpu, threads[0]['tid'], bytes(s), so, st)]
    t0 = perf_time_of(first) - 100000
    side = bytearray()
    # the processes: their exec (COMM) and code; a process with a "parent" was forked from
    # it (its maps inherited, so no MMAP of its own before its exec), and execs its own
    # program ("exec") after the fork
    t = t0
    for p in spec['procs']:
        if 'parent' in p:
            side += rec(REC_FORK, 0, struct.pack('<IIIIQ', p['pid'], p['parent'], p['pid'],
                                                 p['parent'], t) +
                        sample_id(p['pid'], p['pid'], t, 0))
            t += 10
        side += comm(p['pid'], p['pid'], p['comm'], t)
        t += 10
        for m in p['modules']:
            side += module_maps(m, p['pid'], t)
        t += 10
    # the threads that are not their process's first: created by it (clone)
    for th in threads:
        if th['tid'] != th['pid']:
            side += rec(REC_FORK, 0, struct.pack('<IIIIQ', th['pid'], th['pid'], th['tid'],
                                                 th['pid'], t) +
                        sample_id(th['pid'], th['tid'], t, 0))
            t += 10
    # the switches: out (the next thread in next_prev) and in (the previous one), as the
    # kernel writes them for a CPU-wide event
    for tm, out_of, into in switches:
        side += rec(REC_SWITCH_CPU_WIDE, MISC_SWITCH_OUT,
                    struct.pack('<II', *into) + sample_id(*out_of, perf_time_of(tm), cpu))
        side += rec(REC_SWITCH_CPU_WIDE, 0,
                    struct.pack('<II', *out_of) + sample_id(*into, perf_time_of(tm) + 1, cpu))
    end = perf_time_of(max(v for _, _, _, _, st in streams for _, v in st)) + 100000
    tail = bytearray()
    for th in threads:
        tail += rec(REC_EXIT, 0, struct.pack('<IIIIQ', th['pid'], th['pid'], th['tid'],
                                             th['pid'], end) +
                    sample_id(th['pid'], th['tid'], end, 0))
    # who ran at a TSC (the AUX records name the thread the kernel wrote them in)
    ins = [(tm, into) for tm, _, into in switches]

    def running(tsc, tid):
        return next((w for tm, w in reversed(ins) if tm <= tsc), (pid_of[tid], tid))
    return bytes(side), streams, running, bytes(tail)


def migrate(stream, cpus, offs, tscs, perf_time, a, data):
    """--migrate: the thread's trace cut at PSBs into pieces run on CPUS in turn; the
    queues' streams (one per CPU) and the SWITCH records, appended to DATA."""
    _, tid, pt, _, _ = stream
    starts = psb_starts(dump_lines(a.packets))
    n = len(cpus)
    if len(starts) < n - 1:
        raise SystemExit('--migrate: too few PSBs with a FUP')
    picks = [starts[(k + 1) * len(starts) // n - 1] for k in range(n - 1)]
    edges = [0] + [o for o, _ in picks] + [len(pt)]
    out = {}
    for k, cpu in enumerate(cpus):
        lo, hi = edges[k], edges[k + 1]
        s, so, st = out.setdefault(cpu, (bytearray(), [], []))
        base = len(s)
        s += pt[lo:hi]
        so += [o - lo + base for o in offs if lo <= o < hi]
        pts = [(o - lo + base, v) for o, v in tscs if lo <= o < hi]
        st += pts
        if k < n - 1:
            # switched out: FUP at the IP where the next piece begins, TIP.PGD without IP
            so += [len(s), len(s) + 7]
            s += bytes([0x7d]) + struct.pack('<Q', picks[k][1])[:6] + bytes([0x01])
        # the thread switched in before the piece's first TSC, out after its last
        t_in, t_out = perf_time(pts[0][1]) - 1, perf_time(pts[-1][1]) + 1
        for t, misc in ((t_in, 0), (t_out, MISC_SWITCH_OUT)):
            data += rec(REC_SWITCH, misc, sample_id(a.pid, tid, t, cpu))
    return [(cpu, tid, bytes(s), so, st) for cpu, (s, so, st) in sorted(out.items())]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--queue', action='append', default=[])
    ap.add_argument('--module', action='append', default=[])
    ap.add_argument('--buffer', type=int, default=4096)
    ap.add_argument('--drop', type=int, default=-1)
    ap.add_argument('--packets')
    ap.add_argument('--vdso')
    ap.add_argument('--pid', type=int, default=4242)
    ap.add_argument('--snapshot')
    ap.add_argument('--tsc-hz', type=int, default=0)
    ap.add_argument('--per-thread', action='store_true')
    ap.add_argument('--kernel')
    ap.add_argument('--threads', type=int, default=0)
    ap.add_argument('--timed', action='store_true')
    ap.add_argument('--time-zero', type=int, default=0)
    ap.add_argument('--migrate')
    ap.add_argument('--session')
    ap.add_argument('--lose', type=int, default=-1)
    ap.add_argument('--cpuid')
    a = ap.parse_args()
    a.timed = a.timed or bool(a.session)
    if a.timed and not a.packets and not a.session:
        ap.error('--timed needs --packets')
    if a.migrate and (not a.timed or len(a.queue) != 1):
        ap.error('--migrate needs --timed and one --queue')
    # perf record --threads=N: OUT is a directory; its writer threads' records (the
    # mappings and each queue's buffers) go to OUT/data.K, the rest to OUT/data
    parts = [bytearray() for _ in range(a.threads)]

    # attr: type, size, config, sample_period, sample_type, read_format, flags, the rest 0
    # exclude_kernel, mmap, comm, sample_id_all (perf orders records by it), mmap2
    flags = (1 << 5) | (1 << 8) | (1 << 9) | (1 << 18) | (1 << 23)
    if a.kernel:
        flags &= ~(1 << 5)
    if a.migrate or (a.session and not a.per_thread):
        flags |= 1 << 26         # context_switch: PERF_RECORD_SWITCH records
    attr = struct.pack('<IIQQQQQ', PMU_TYPE, ATTR_SIZE, CONFIG, 1, SAMPLE_TYPE, 0, flags)
    attr += b'\0' * (ATTR_SIZE - len(attr))

    data = bytearray()
    # priv: pmu type, time shift/mult/zero, cap_user_time_zero, tsc bit, noretcomp bit,
    # have_sched_switch, snapshot mode, per-cpu mmaps, mtc bit, mtc freq bits, tsc:ctc
    # n and d (CPUID 0x15 ebx, eax), cyc bit, max non-turbo ratio, filter string length
    # time shift and mult: perf's conversion of TSC ticks to ns (0: none given)
    shift, mult = (31, (10**9 << 31) // a.tsc_hz) if a.tsc_hz else (31, 1 << 31) if a.timed else (0, 0)
    time_zero = a.time_zero if a.timed else 0

    def perf_time(tsc):
        """perf's clock at TSC value TSC (tools/perf/util/tsc.c: the quotient and the
        remainder by 2^shift converted apart, so the product cannot overflow 64 bits)"""
        return time_zero + (tsc >> shift) * mult + (((tsc & ((1 << shift) - 1)) * mult) >> shift)
    # (offset, value) of the TSC packets in the PT files (--packets), for --timed
    tscs = []
    if a.timed and not a.session:
        with open(a.packets) as f:
            for line in f:
                w = line.split()
                if len(w) >= 3 and w[1] == 'tsc':
                    tscs.append((int(w[0], 16), int(w[2], 16)))
        if not tscs:
            ap.error('--timed: no TSC packets in the trace')
    # sideband before the trace: the mappings and the COMM happen before its first TSC
    t_start = perf_time(tscs[0][1]) - 1000 if tscs else 0
    # have_sched_switch 2: switches from the context_switch records
    priv = [PMU_TYPE, shift, mult, time_zero, 1 if a.timed else 0, 1 << 10, 1 << 11,
            2 if a.migrate or (a.session and not a.per_thread) else 0,
            1 if a.snapshot else 0,
            0 if a.per_thread else 1,
            1 << 9, 0xf << 14, 2, 1, 1 << 1, 24, 0]
    data += rec(REC_AUXTRACE_INFO, 0, struct.pack('<II', 1, 0) + struct.pack('<%dQ' % len(priv), *priv))
    if not a.session:
        for m in a.module:
            (parts[0] if parts else data).extend(module_maps(m, a.pid, t_start))

    if a.timed and not a.session:
        # the program's name, as perf records it at exec (comm_exec)
        name = os.path.basename(a.module[0].split(':')[0]).encode()[:15] + b'\0' if a.module else b'prog\0'
        name += b'\0' * (-len(name) % 8)
        data += rec(REC_COMM, MISC_COMM_EXEC, struct.pack('<II', a.pid, a.pid) + name +
                    sample_id(a.pid, a.pid, t_start, 0))
        # the queues' other threads, created by the process (pid, ppid, tid, ptid, time)
        for tid in sorted({int(q.split(':')[1]) for q in a.queue} - {a.pid}):
            data += rec(REC_FORK, 0, struct.pack('<IIIIQ', a.pid, a.pid, tid, a.pid, t_start) +
                        sample_id(a.pid, tid, t_start, 0))

    if a.vdso:
        addr, bid = a.vdso.split(':')
        bid = bytes.fromhex(bid)
        ident = struct.pack('<B3x', len(bid)) + bid.ljust(20, b'\0')
        body = struct.pack('<IIQQQ', a.pid, a.pid, int(addr, 0), 0x2000, 0) + ident + \
            struct.pack('<II', 5, 2) + b'[vdso]\0\0' + sample_id(a.pid, a.pid, t_start, 0)
        data += rec(REC_MMAP2, MISC_USER | 0x4000, body)

    if a.kernel:
        # pid -1 (the host's kernel), the map from _text for 16 MiB, pgoff: _text's address
        addr, _, bid = a.kernel.partition(':')
        addr = int(addr, 0)
        head = struct.pack('<IIQQQ', 0xffffffff, 0, addr, 16 << 20, addr)
        name = b'[kernel.kallsyms]_text\0'
        name += b'\0' * (-len(name) % 8)
        if bid:
            bid = bytes.fromhex(bid)
            ident = struct.pack('<B3x', len(bid)) + bid.ljust(20, b'\0')
            data += rec(REC_MMAP2, MISC_KERNEL | 0x4000, head + ident + struct.pack('<II', 5, 2) +
                        name + sample_id(0xffffffff, 0, t_start, 0))
        else:
            data += rec(REC_MMAP, MISC_KERNEL, head + name + sample_id(0xffffffff, 0, t_start, 0))
        # and a module after it, as perf lists the loaded ones
        name = b'/lib/modules/6.1.0/kernel/drivers/tk/tk_test.ko\0'
        name += b'\0' * (-len(name) % 8)
        data += rec(REC_MMAP, MISC_KERNEL, struct.pack('<IIQQQ', 0xffffffff, 0, addr + (16 << 20),
                                                        0x4000, 0) + name +
                    sample_id(0xffffffff, 0, t_start, 0))

    # each queue's (cpu, tid, trace, packet offsets, TSC packets)
    offs_all = []
    if a.packets:
        with open(a.packets) as f:
            offs_all = sorted({int(w[0], 16) for w in (line.split() for line in f)
                               if w and all(c in '0123456789abcdef' for c in w[0])})
    streams = []
    for q in a.queue:
        cpu, tid, path = q.split(':', 2)
        with open(path, 'rb') as f:
            streams.append((int(cpu) & 0xffffffff, int(tid), f.read(), offs_all, tscs))
    tail = b''

    def running(tsc, tid):
        return a.pid, tid
    if a.session:
        side, streams, running, tail = session(a, perf_time)
        data += side
    if a.migrate:
        streams = migrate(streams[0], [int(c) for c in a.migrate.split(',')], offs_all, tscs,
                          perf_time, a, data)
    queues = []
    for idx, (cpu, tid, pt, offs, qtscs) in enumerate(streams):
        cuts = list(range(a.buffer, len(pt), a.buffer))
        if a.packets or a.session:
            cuts = sorted({offs[i] if i < len(offs) else len(pt)
                           for i in (bisect.bisect_left(offs, c) for c in cuts)})
        edges = [0] + [c for c in cuts if 0 < c < len(pt)] + [len(pt)]
        # (offset in the trace, data) of each buffer
        bufs = [(edges[i], pt[edges[i]:edges[i + 1]]) for i in range(len(edges) - 1)]
        if a.snapshot:
            size, step = a.snapshot.split(':')
            size = int(size, 0)
            if step.startswith('@'):
                ends = sorted({int(e, 0) for e in step[1:].split(',')} | {len(pt)})
            else:
                step = int(step, 0)
                ends = [e for e in edges[1:] if e >= step]
                ends = sorted({next(e for e in ends if e >= k) for k in range(step, len(pt), step)} |
                              {len(pt)})
            bufs = [(max(0, e - size), pt[max(0, e - size):e]) for e in ends]
        queues.append((idx, cpu, tid, bufs, qtscs))
    # buffers of the queues in turn, as perf writes them when its mmaps fill
    # perf's offset is where the buffer's data began in the kernel's ring (head minus the
    # size): it steps by the data, not by the padding to 8 bytes (tools/perf/util/auxtrace.c)
    lost = False
    for k in range(max(len(q[3]) for q in queues)):
        for idx, cpu, tid, bufs, qtscs in queues:
            if k >= len(bufs):
                continue
            out = parts[idx % len(parts)] if parts else data
            offset, b = bufs[k]
            if idx == 0 and lost:
                # --lose: the hardware starts again with a PSB when the kernel has room
                psb = b.find(bytes([2, 0x82]) * 8)
                if psb < 0:
                    continue
                offset, b, lost = offset + psb, b[psb:], False
            pad = b'\0' * (-len(b) % 8)
            size = len(b) + len(pad)
            # --timed: a TSC after the buffer's last TSC packet (perf decodes by time from
            # it), and the AUX record then
            ref = next((v for o, v in reversed(qtscs) if o < offset + len(b)),
                       qtscs[0][1] if qtscs else -1) + 1
            if not (idx == 0 and k in (a.drop, a.lose)):
                out += rec(REC_AUXTRACE, 0, struct.pack('<QQQIIII', size, offset, ref, idx,
                                                        tid, cpu, 0)[:40]) + b + pad
                # PERF_RECORD_AUX: aux offset, size, flags
                out += rec(REC_AUX, 0, struct.pack('<QQQ', offset, size, 0) +
                           sample_id(*running(ref, tid), perf_time(ref) if a.timed else 0, cpu))
            elif k == a.lose:
                lost = True
                out += rec(REC_AUX, 0, struct.pack('<QQQ', offset, size, AUX_TRUNCATED) +
                           sample_id(*running(ref, tid), perf_time(ref), cpu))
    data += tail

    hdr_size, n_attrs = 104, 1
    attrs_off = hdr_size
    ids_off = attrs_off + n_attrs * (ATTR_SIZE + 16)
    data_off = ids_off + 8
    header = b'PERFILE2' + struct.pack('<QQ', hdr_size, ATTR_SIZE + 16)
    header += struct.pack('<QQ', attrs_off, n_attrs * (ATTR_SIZE + 16))
    header += struct.pack('<QQ', data_off, len(data))
    header += struct.pack('<QQ', 0, 0)            # event types (unused)
    # feature sections: none, or with --threads HEADER_DIR_FORMAT (bit 24; its content the
    # u64 version 1), which tells perf to read the data.K files; the section table follows
    # the data
    # and with --cpuid HEADER_CPUID (bit 9): a u32 length and the string, NUL-padded to
    # 64 bytes as perf writes strings
    sections = []
    if a.cpuid:
        text = a.cpuid.encode() + b'\0'
        text += b'\0' * (-len(text) % 64)
        sections.append((9, struct.pack('<I', len(text)) + text))
    if parts:
        sections.append((24, struct.pack('<Q', 1)))
    features, table, body = 0, b'', b''
    content_off = data_off + len(data) + 16 * len(sections)
    for bit, content in sections:
        features |= 1 << bit
        table += struct.pack('<QQ', content_off + len(body), len(content))
        body += content
    tail = table + body
    header += features.to_bytes(32, 'little')
    out = a.out
    if parts:
        os.makedirs(a.out, exist_ok=True)
        out = os.path.join(a.out, 'data')
        for k, part in enumerate(parts):
            with open('%s.%d' % (out, k), 'wb') as f:
                f.write(bytes(part))
    with open(out, 'wb') as f:
        f.write(header + attr + struct.pack('<QQ', ids_off, 8) + struct.pack('<Q', EVENT_ID) +
                bytes(data) + tail)


if __name__ == '__main__':
    main()
