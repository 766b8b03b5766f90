#!/usr/bin/env bash
# TK_PHASES (bench/scaling.sh's serial fraction): the pool tells apart where CPU went. At
# -j 1 a chunked decode runs its jobs on the main thread; at -j 2 on workers (a timeline's
# also on the main thread between its merges: caller_decodes); the parts add
# up to the process's CPU; an Intel PT timeline at -j 2 runs its pass on the main thread
# (nothing in order outside the pools), and from -j 3 its formatter is a thread outside the
# pools whose work goes in order, part of the other threads' time; the CPU used before main()
# (the exec) is printed apart, outside the sum; a pool run inside a job on the main thread
# is counted once (the branch trace's profile); without TK_PHASES nothing is printed.
set -uo pipefail
: "${TK:?}" "${SRC:?}"
fail=0
# 8000 copies of a two-PSB stream: enough work that the workers' CPU time shows in the
# line's milliseconds on a fast machine (one copy's jobs printed 0.000 on workers), and
# that a worker gets a turn on a loaded one (with 1000, a timeline's calling thread
# decoded every chunk before its worker ran, beside three busy processes on two cores)
pt=$(mktemp)
trap 'rm -f "$pt"' EXIT
python3 -c 'import sys; sys.stdout.buffer.write(open(sys.argv[1], "rb").read() * 8000)' \
	"$SRC/tests/data/flow/events.pt" >"$pt"
run() { # J [COMMAND...]: the phases line of COMMAND (decode --stat) over the chunks, one per PSB
	local j=$1
	shift
	[ $# -gt 0 ] || set -- decode --stat
	TK_IPT_CHUNK=1 TK_PHASES=1 "$TK" "$@" -j "$j" \
		--raw "$SRC/tests/data/flow/code.bin:0x1000" "$pt" 2>&1 >/dev/null |
		grep '^tracekit: phases:'
}
check() { # J LINE [timeline]
	python3 - "$@" <<'PY'
import re, sys
j, line, timeline = int(sys.argv[1]), sys.argv[2], len(sys.argv) > 3
num = lambda pat: float(re.search(pat, line).group(1))
cpu, serial, merge, jobs = num(r"cpu ([0-9.]+) s ="), num(r"serial ([0-9.]+)"), num(r"merge ([0-9.]+)"), num(r"jobs ([0-9.]+)")
workers, on_main, other = num(r"\(([0-9.]+) on workers"), num(r"([0-9.]+) on the main thread"), num(r"other threads ([0-9.]+)")
ordered = num(r"other threads [0-9.]+ \(([0-9.]+) in order\)")
before = num(r"before main\(\) ([0-9.]+) s")
njobs = int(re.search(r"; ([0-9]+) jobs in", line).group(1))
errs = []
if njobs < 2: errs.append(f"{njobs} jobs, expected the two chunks")
if j == 1 and workers != 0: errs.append("-j 1 ran jobs on workers")
if j >= 2 and workers <= 0: errs.append(f"-j {j} ran no jobs on workers")
# (the timeline's chunks never wait for a merge: the main thread decodes some too)
if j >= 2 and not timeline and on_main != 0: errs.append(f"-j {j} ran jobs on the main thread")
if min(serial, merge, jobs, other, before) < 0: errs.append("a negative part")
if abs(serial + merge + jobs + other - cpu) > 0.004: errs.append("parts do not add up to the CPU time")
if ordered > other + 0.001: errs.append("more in order than the other threads did")
if j == 1 and (other != 0 or ordered != 0): errs.append("-j 1 had other threads")
if timeline and j == 2 and ordered != 0: errs.append("the timeline at -j 2 had work in order outside the pools")
if timeline and j >= 3 and ordered <= 0: errs.append("the timeline's formatter did nothing in order")
if not timeline and ordered != 0: errs.append("decode --stat has nothing in order outside the pools")
print(("FAIL: -j %d: " % j + "; ".join(errs) + ": " + line) if errs else "ok: -j %d: %s" % (j, line))
sys.exit(1 if errs else 0)
PY
}
# (a timeline's calling thread decodes chunks too: on a loaded machine it can finish them
# all before a worker is scheduled, so that run is tried up to three times)
for j in 1 2 3; do
	line=$(run "$j")
	check "$j" "$line" || fail=1
	for try in 1 2 3; do
		line=$(run "$j" convert --to perfetto -o /dev/null)
		if check "$j" "$line" timeline >"$pt.out"; then break; fi
		[ "$try" = 3 ] && fail=1
	done
	cat "$pt.out"
done
rm -f "$pt.out"
# a profile's merges count the chunks' call-tree nodes they graft and those new to the total:
# none at -j 1 (the events go to the total), and at -j 2 over 8000 copies of one stream
# most paths repeat (fewer made than grafted)
merges() { # J: the merges line of profile -j J
	TK_IPT_CHUNK=1 TK_PHASES=1 "$TK" profile -j "$1" -o /dev/null \
		--raw "$SRC/tests/data/flow/code.bin:0x1000" "$pt" 2>&1 >/dev/null | grep '^tracekit: merges:'
}
if [ -n "$(merges 1)" ]; then
	echo "FAIL: profile -j 1 merged chunk profiles"
	fail=1
fi
line=$(merges 2)
read -r grafted made < <(sed -n 's/.*merges: \([0-9]*\) call-tree nodes.*grafted, \([0-9]*\) of them.*/\1 \2/p' <<<"$line")
if [ -z "${made:-}" ] || [ "$made" -le 0 ] || [ "$made" -ge "$grafted" ]; then
	echo "FAIL: profile -j 2: expected 0 < new nodes < grafted nodes: $line"
	fail=1
else
	echo "ok: profile -j 2: $line"
fi
# the branch trace's profile runs pools inside jobs on the main thread: those count once
# (they were counted in the outer pool's job and again in their own: a negative serial)
bt=$(mktemp -d)
cc -O1 -o "$bt/calls" "$SRC/tests/data/btrace/calls.c"
if ! "$TK" record --btrace -o "$bt/calls.tkbt" -- "$bt/calls" >/dev/null 2>"$bt/err"; then
	echo "FAIL: record --btrace: $(head -c 300 "$bt/err")"
	fail=1
else
	line=$(TK_PHASES=1 "$TK" profile -j 2 -o /dev/null "$bt/calls.tkbt" 2>&1 >/dev/null | grep '^tracekit: phases:')
	python3 - "$line" <<'PY' || fail=1
import re, sys
line = sys.argv[1]
num = lambda pat: float(re.search(pat, line).group(1))
parts = [num(r"serial (-?[0-9.]+) \("), num(r"merge (-?[0-9.]+) \("), num(r"jobs (-?[0-9.]+) \("),
         num(r"other threads (-?[0-9.]+)")]
cpu = num(r"cpu ([0-9.]+) s =")
ok = min(parts) >= 0 and abs(sum(parts) - cpu) <= 0.004
print(("ok" if ok else "FAIL") + ": the branch trace's profile -j 2: " + line)
sys.exit(0 if ok else 1)
PY
fi
rm -rf "$bt"
if TK_IPT_CHUNK=1 "$TK" decode --stat -j 2 --raw "$SRC/tests/data/flow/code.bin:0x1000" \
	"$SRC/tests/data/flow/events.pt" 2>&1 >/dev/null | grep -q phases; then
	echo "FAIL: phases printed without TK_PHASES"
	fail=1
fi
exit $fail
