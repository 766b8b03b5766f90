#!/usr/bin/env bash
# xtrace recorder, register values against qemu's own log: a program with exclusive stores,
# MRS/MSR, DC ZVA, conditional selects, MRS RNDR and syscalls recorded with
# `tracekit record --qemu`; every STXR, MRS, DC, MISC_FLAGS and ALLGPR item must equal the
# register in qemu's -singlestep -d cpu dump before (operands) or after (results) its
# instruction, and every snapshot's TPIDR_EL0 the last value an MSR TPIDR_EL0 wrote.
set -euo pipefail
: "${TK:?}" "${SRC:?}"
command -v qemu-aarch64 >/dev/null && command -v aarch64-linux-gnu-gcc >/dev/null || {
	echo "qemu-aarch64 and gcc-aarch64-linux-gnu are required (scripts/install-deps.sh)"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
run() { env -i PATH="$PATH" TK_XTRACE_INTERVAL=3000 "$@"; }
aarch64-linux-gnu-gcc -O2 -march=armv8.2-a -static -o "$TMP/prog" "$SRC/tests/data/xtrace/qemu-regs.c"

run "$TK" record --qemu -q -o "$TMP/out" -- "$TMP/prog" >"$TMP/prog.out"
grep -q '^acc ' "$TMP/prog.out"
insn=$(ls "$TMP"/out/xtrace.*.hint9.xinsndata.bin)
snap=$(ls "$TMP"/out/xtrace.*.hint9.xsnapshot.bin)
# stdout a file in both runs: the C library takes another path for /dev/null or a terminal.
run qemu-aarch64 -seed 1 -singlestep -d cpu,nochain -D "$TMP/cpu.log" "$TMP/prog" >"$TMP/prog2.out"
cmp "$TMP/prog.out" "$TMP/prog2.out"
"$TK" dump "$insn" >"$TMP/items.txt"
"$TK" dump "$snap" >"$TMP/snap.txt"

python3 - "$TMP/items.txt" "$TMP/cpu.log" "$TMP/snap.txt" <<'PY'
import re, sys
items, log, snap = sys.argv[1:4]
# qemu: one dump before each instruction (singlestep): X0-X30, SP, NZCV
dumps = []
cur = None
for line in open(log):
    if line.startswith(' PC='):
        cur = {}
        dumps.append(cur)
    if cur is None:
        continue
    for k, v in re.findall(r'(X\d\d|SP|PSTATE)=([0-9a-f]+)', line):
        if k == 'PSTATE':
            cur['nzcv'] = int(v, 16) & 0xf0000000
        else:
            cur[31 if k == 'SP' else int(k[1:])] = int(v, 16)
count = {'STXR': 0, 'MRS': 0, 'DC': 0, 'MISC_FLAGS': 0, 'ALLGPR': 0}
bad = []
# The thread id (set_tid_address) differs between qemu runs and start-up code leaves it in
# a register (x7): such a register may hold the register run's tid instead of this log's.
log_tid = None
pid_like = 0
svcargs = []
m = -1          # index of the last instruction
op = 0
svcret = None
msr_tpidr = []  # (instruction index, value written)
for line in open(items):
    f = line.split()
    if len(f) < 2:
        continue
    kind = f[1]
    if kind in ('INST', 'PCINST'):
        m += 1
        op = int(f[f.index('opcode') + 1], 16)
        continue
    before, after = dumps[m], dumps[m + 1] if m + 1 < len(dumps) else None
    if kind == 'SVCARG':
        svcargs.append(int(f[2], 16))
    if kind == 'SVCRET':
        svcret = int(f[2], 16)
        if svcargs and svcargs[-7] == 96:
            log_tid = after[0]
        svcargs = []
    if kind not in count:
        continue
    count[kind] += 1
    if kind == 'ALLGPR':
        regs = [int(x.split('=')[1], 16) for x in f[2:34]]
        want = [svcret] + [after[r] for r in range(1, 32)]
        for r in range(1, 32):
            if regs[r] != want[r] and want[r] == log_tid and 0 < regs[r] < 1 << 22:
                regs[r] = want[r]
                pid_like += 1
    else:
        got = int(f[2], 16) if kind != 'MISC_FLAGS' else int(f[3], 16)
        rt = op & 31
        if kind == 'STXR':
            want = after[(op >> 16) & 31] & 0xffffffff
        elif kind == 'DC':
            want = before[rt]
        elif kind == 'MRS' and (op & 0xfff00000) == 0xd5100000:   # MSR: value written
            want = before[rt]
            if (op & ~31) == 0xd51bd040:
                msr_tpidr.append((m, want))
        elif kind == 'MRS':
            want = after[rt]
        else:
            want = after['nzcv']
        regs, want = [got], [want]
    if regs != want:
        bad.append(f"{line.strip()[:120]} (instruction {m}, opcode {op:08x}): qemu says {[hex(x) for x in want][:4]}")
print('items checked:', count, f'({pid_like} ALLGPR registers held a thread id)')
for k in ('STXR', 'MRS', 'DC', 'MISC_FLAGS', 'ALLGPR'):
    assert count[k] > 0, f'no {k} item recorded'
assert count['STXR'] >= 200 and count['DC'] >= 200, count
assert msr_tpidr, 'no MSR TPIDR_EL0 in the trace'
if bad:
    print('\n'.join(bad[:20]))
    sys.exit(f'{len(bad)} register values differ from qemu -d cpu')
# Snapshots: TPIDR_EL0 is the last MSR TPIDR_EL0 before the snapshot's instruction.
snaps = nonzero = 0
total = None
for line in open(snap):
    mm = re.search(r'SNAPSHOT \d+ .* total (\d+)', line)
    if mm:
        total = int(mm.group(1))
    mm = re.match(r'\s+tpidr_el0\s+(\S+)', line)
    if mm and total is not None:
        want = 0
        for at, v in msr_tpidr:
            if at < total:
                want = v
        assert int(mm.group(1), 16) == want, (line, total, hex(want))
        snaps += 1
        nonzero += want != 0
        total = None
assert snaps >= 3, f'expected at least 3 snapshots with tpidr_el0, got {snaps}'
assert nonzero >= 2, f'only {nonzero} snapshots after the C library set TPIDR_EL0'
print('snapshots:', snaps, f'TPIDR_EL0 as the MSRs wrote it ({nonzero} non-zero)')
PY
