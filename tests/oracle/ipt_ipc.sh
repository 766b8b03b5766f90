#!/usr/bin/env bash
# Cycles and IPC per function from Intel PT CYC packets (issue #30 item 5, perf's -F+ipc),
# against arithmetic on a hand-made trace. main (0x1000) calls g (0x2000), which loops on
# a jnz three times and returns; each of three rounds is a PSB+ at 0x1000, then
#   CYC 7, TNT(t t n), CYC 12, TNT(t) for g's ret, CYC 5, FUP 0x1007 + TIP.PGD.
# A CYC counts the cycles of the instructions walked since the CYC before, up to where the
# decoder reads it (the branches the packets before it resolve); they go to the function
# running there. So per round: CYC 7 (read before the walk begins, the first after the
# PSB: its cycles began before it) only starts the count; CYC 12 is read when the jnz
# outcomes are used up, in g: 12 cycles for its 8 instructions (nop, call, 3 x nop, jnz);
# CYC 5 when g's ret is used up, back in main's code ([unknown]: no symbols): 5 cycles
# for 1 instruction. Three rounds: g 36 cycles over 24 instructions (IPC 0.67), [unknown]
# 15 over 3 (0.20). -j 2 with a chunk per PSB, and shards merged, give the same; a trace
# without CYC has no cycles column or key. --sort cycles and ipc order the rows by them, and
# are refused without CYC.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
python3 - <<'PY'
import struct
def fup(ip): return bytes([0x7d]) + struct.pack('<Q', ip)[:6]
def cyc(v): return bytes([(v << 3) | 3])
def tnt(bits):
    v = 1
    for b in bits: v = v << 1 | (b == 't')
    return bytes([v << 1])
head = bytes([0x02, 0x82] * 8) + bytes([0x99, 0x01]) + fup(0x1000) + bytes([0x02, 0x23])
rnd = head + cyc(7) + tnt('ttn') + cyc(12) + tnt('t') + cyc(5) + fup(0x1007) + bytes([0x01])
nocyc = head + tnt('ttn') + tnt('t') + fup(0x1007) + bytes([0x01])
open('trace.pt', 'wb').write(rnd * 3)
open('nocyc.pt', 'wb').write(nocyc * 3)
# other cycles: g slow (31 cycles for its 8 instructions), main fast; and the other way
slowg = head + cyc(7) + tnt('ttn') + cyc(31) + tnt('t') + cyc(1) + fup(0x1007) + bytes([0x01])
fastg = head + cyc(7) + tnt('ttn') + cyc(2) + tnt('t') + cyc(30) + fup(0x1007) + bytes([0x01])
open('slowg.pt', 'wb').write(slowg * 3)
open('fastg.pt', 'wb').write(fastg * 3)
# main: nop; call 0x2000; nop; nop; jmp 0x1000   g: nop; jnz 0x2000; ret
open('main.bin', 'wb').write(bytes.fromhex('90 e8fa0f0000 90 90 ebf6'))
open('g.bin', 'wb').write(bytes.fromhex('90 75fd c3'))
PY
raw=(--raw main.bin:0x1000 --raw g.bin:0x2000)
"$TK" profile -j 1 --to csv "${raw[@]}" trace.pt >j1.csv
cat >want.csv <<'CSV'
function,calls,incl_time,excl_time,incl_insns,excl_insns,min,median,p90,p99,max,cycles,ipc
"0x2000",3,,,21,21,,,,,,36,0.67
"[unknown]",0,,,30,9,,,,,,15,0.20
CSV
diff want.csv j1.csv || { echo "cycles per function differ from the arithmetic"; exit 1; }
"$TK" profile -j 1 --to json "${raw[@]}" trace.pt >j1.json
python3 - j1.json <<'PY'
import json, sys
f = {r['name']: r for r in json.load(open(sys.argv[1]))['functions']}
got = {n: (r['cycles'], r['ipc_insns'], r['ipc']) for n, r in f.items()}
want = {'0x2000': (36, 24, 0.67), '[unknown]': (15, 3, 0.2)}
if got != want:
    sys.exit('json: %s, expected %s' % (got, want))
PY
grep -q '  cycles    ipc  ' <("$TK" profile -j 1 "${raw[@]}" trace.pt) || { echo "text: no cycles, ipc columns"; exit 1; }
for to in csv json text; do
	"$TK" profile -j 1 --to $to "${raw[@]}" trace.pt >a
	TK_IPT_CHUNK=1 "$TK" profile -j 2 --to $to "${raw[@]}" trace.pt >b
	cmp -s a b || { echo "$to: -j 2 with a chunk per PSB differs from -j 1"; diff a b; exit 1; }
	rm -f p1 p2 p3
	for i in 1 2 3; do TK_IPT_CHUNK=1 "$TK" profile --shard $i/3 -o p$i "${raw[@]}" trace.pt; done
	TK_IPT_CHUNK=1 "$TK" merge --to $to p1 p2 p3 >m
	cmp -s a m || { echo "$to: shards merged differ from -j 1"; diff a m; exit 1; }
done
# no CYC: no cycles (absent, not 0)
"$TK" profile --to csv "${raw[@]}" nocyc.pt | head -1 | grep -q ',max$' || { echo "csv without CYC has cycles"; exit 1; }
! grep -q cycles <("$TK" profile --to json "${raw[@]}" nocyc.pt) || { echo "json without CYC has cycles"; exit 1; }
! grep -q cycles <("$TK" profile "${raw[@]}" nocyc.pt) || { echo "text without CYC has cycles"; exit 1; }
# --sort cycles, ipc (largest first) where the default order (exclusive instructions: g
# first) is the other: main's code has more cycles in fastg.pt, a higher IPC in slowg.pt
order() { "$TK" profile -j 1 --to csv "${raw[@]}" "$@" | awk -F, 'NR > 1 { printf "%s %s %s;", $1, $12, $13 }'; }
[ "$(order fastg.pt)" = '"0x2000" 6 4.00;"[unknown]" 90 0.03;' ] &&
	[ "$(order fastg.pt --sort cycles)" = '"[unknown]" 90 0.03;"0x2000" 6 4.00;' ] &&
	[ "$(order fastg.pt --sort ipc)" = '"0x2000" 6 4.00;"[unknown]" 90 0.03;' ] &&
	[ "$(order slowg.pt --sort ipc)" = '"[unknown]" 3 1.00;"0x2000" 93 0.26;' ] &&
	[ "$(order slowg.pt --sort cycles)" = '"0x2000" 93 0.26;"[unknown]" 3 1.00;' ] ||
	{ echo "--sort cycles/ipc: wrong order"; for f in fastg slowg; do for k in cycles ipc; do
		echo "$f $k: $(order $f.pt --sort $k)"; done; done; exit 1; }
"$TK" profile -j 1 --sort ipc "${raw[@]}" slowg.pt | awk '/cycles/ { h = 1; next } h && NF { print $NF; exit }' |
	grep -qx '\[unknown\]' || { echo "--sort ipc: text table not in IPC order"; exit 1; }
# without CYC: refused with the reason (not sorted by zeros)
for k in cycles ipc; do for to in text csv json calltree; do
	rc=0; "$TK" profile -j 1 --sort $k --to $to "${raw[@]}" nocyc.pt >out 2>err || rc=$?
	[ $rc = 2 ] && grep -q "sort $k: the trace has no cycles" err && [ "$(wc -l <err)" = 1 ] ||
		{ echo "--sort $k --to $to without CYC: exit $rc"; cat err; exit 1; }
done; done
echo ok
