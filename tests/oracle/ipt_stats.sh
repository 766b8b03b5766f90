#!/usr/bin/env bash
# tracekit stats on Intel PT, against the instruction listing as ground truth. The trace is
# a recorded run of a real program (tests/data/seams/lj.c over libc: loops, recursion,
# longjmp) converted to what the hardware would write.
# - instructions: those `decode` lists
# - conditional branches taken / not taken: from the listing, a jcc is taken when the next
#   instruction listed is its target (its operand), an independent count of what the
#   stats take from the decoder's branch events
# - calls and returns: the listing's call and ret lines; distinct instructions: its distinct
#   addresses; the instruction mix adds up to the total
# - the same numbers with -j 1, -j 2 and small chunks; perf.data of two CPUs: twice one
# - the branch trace (.tkbt) itself: as its Intel PT; its threads add up; truncated: exit 1
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -o "$work/lj" "$SRC/tests/data/seams/lj.c"
libc=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
"$TK" record --btrace -o "$work/lj.tkbt" --module main --module "$libc" -- "$work/lj" \
	>/dev/null 2>"$work/rec.err" || { echo "record failed"; cat "$work/rec.err"; exit 1; }
"$TK" convert --to ipt -q -o "$work/lj.pt" "$work/lj.tkbt"
elfargs=()
for m in $("$TK" info "$work/lj.tkbt" | awk '$1 == "module" {
	for (i = 3; i < NF; i++) if ($i == "bias") printf "%s:%s ", $2, $(i + 1) }'); do
	elfargs+=(--elf "$m")
done
"$TK" stats "${elfargs[@]}" "$work/lj.pt" >"$work/stats.txt"
"$TK" decode "${elfargs[@]}" "$work/lj.pt" >"$work/list.txt"
# the count of the row named $1 ("  NAME   COUNT  PERCENT")
get() { awk -v k="$1" 'index($0, "  " k " ") == 1 {
	for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) { print $i; exit } }' "$work/stats.txt"; }

python3 - "$work/list.txt" >"$work/truth.txt" <<'PY'
import re, sys
insns = []
for line in open(sys.argv[1]):
    if line.startswith('['):
        insns.append(None)          # an event: the next line does not follow
        continue
    addr, text = line.split(None, 1)
    insns.append((int(addr, 16), text.split()))
taken = not_taken = calls = rets = total = 0
seen = set()
for i, x in enumerate(insns):
    if x is None:
        continue
    total += 1
    seen.add(x[0])
    m = x[1][0]
    if m.startswith('call'):
        calls += 1
    elif m.startswith('ret'):
        rets += 1
    elif re.fullmatch(r'j(?!mp)[a-z]+|loop[a-z]*', m):
        nxt = insns[i + 1] if i + 1 < len(insns) else None
        if nxt is None:
            continue                # the trace ends or stops here: no outcome to see
        if nxt[0] == int(x[1][1], 16):
            taken += 1
        else:
            not_taken += 1
print('total', total)
print('taken', taken)
print('not_taken', not_taken)
print('calls', calls)
print('returns', rets)
print('distinct', len(seen))
PY
truth() { awk -v k="$1" '$1 == k {print $2}' "$work/truth.txt"; }
check() {
	[ "$2" = "$3" ] || { echo "$1: stats say $2, the listing $3"; cat "$work/stats.txt"; exit 1; }
}
check "instructions" "$(get total)" "$(truth total)"
check "conditional taken" "$(get 'conditional taken')" "$(truth taken)"
check "conditional not taken" "$(get 'conditional not taken')" "$(truth not_taken)"
check "calls" "$(( $(get 'direct calls') + $(get 'indirect calls') ))" "$(truth calls)"
check "returns" "$(get returns)" "$(truth returns)"
check "distinct instructions" "$(get 'distinct instructions')" "$(truth distinct)"
[ "$(truth taken)" -gt 1000 ] && [ "$(truth not_taken)" -gt 1000 ] ||
	{ echo "too few branches to test: $(truth taken) / $(truth not_taken)"; exit 1; }
mix=$(awk '/^instruction mix/ {m = 1; next} /^[^ ]/ {m = 0} m {s += $2} END {print s}' "$work/stats.txt")
check "instruction mix sum" "$mix" "$(truth total)"

# JSON: the same rows
"$TK" stats --to json "${elfargs[@]}" "$work/lj.pt" >"$work/stats.json"
check "json: conditional taken" "$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["branches"]["conditional taken"])' "$work/stats.json")" "$(truth taken)"
# CSV: the same rows, one a line
"$TK" stats --to csv "${elfargs[@]}" "$work/lj.pt" >"$work/stats.csv"
check "csv: conditional taken" "$(awk -F, '$1 == "branches" && $2 == "\"conditional taken\"" {print $3}' \
	"$work/stats.csv")" "$(truth taken)"
check "csv: instruction mix sum" "$(awk -F, '$1 == "mix" {s += $3} END {print s}' "$work/stats.csv")" \
	"$(truth total)"
# the same for any -j and chunk size
"$TK" stats -j 1 "${elfargs[@]}" "$work/lj.pt" | cmp -s - "$work/stats.txt" ||
	{ echo "-j 1 differs"; exit 1; }
TK_IPT_CHUNK=4096 "$TK" stats -j 2 "${elfargs[@]}" "$work/lj.pt" | cmp -s - "$work/stats.txt" ||
	{ echo "4 KiB chunks on 2 threads differ"; exit 1; }
# perf.data with the trace on two CPUs: every execution count doubles, the footprint not
mods=()
for m in "${elfargs[@]}"; do [ "$m" = --elf ] || mods+=(--module "$m"); done
python3 "$SRC/tests/tools/mkperf.py" "$work/two.data" --queue 0:1:"$work/lj.pt" \
	--queue 3:1:"$work/lj.pt" "${mods[@]}"
"$TK" stats "$work/two.data" >"$work/two.txt"
cp "$work/two.txt" "$work/stats.txt"
check "two CPUs: instructions" "$(get total)" "$(( 2 * $(truth total) ))"
check "two CPUs: conditional taken" "$(get 'conditional taken')" "$(( 2 * $(truth taken) ))"
check "two CPUs: distinct instructions" "$(get 'distinct instructions')" "$(truth distinct)"
# a lost buffer: stats say so as decode does (the queue's gap, exit status 1), and count
# what was decoded around it
python3 "$SRC/tests/tools/mkperf.py" "$work/hole.data" --queue 0:1:"$work/lj.pt" "${mods[@]}" --drop 3
rc=0
"$TK" stats "$work/hole.data" >"$work/stats.txt" 2>"$work/hole.err" || rc=$?
[ $rc = 1 ] && grep -q 'hole.data \[cpu 0\]: [0-9]* gaps\?, ' "$work/hole.err" &&
	grep -q 'bytes of trace after losses left out' "$work/hole.err" ||
	{ echo "lost buffer: exit $rc"; cat "$work/hole.err"; exit 1; }
[ "$(get total)" -gt $(( $(truth total) / 2 )) ] && [ "$(get total)" -lt "$(truth total)" ] ||
	{ echo "lost buffer: $(get total) instructions of $(truth total)"; exit 1; }

# the branch trace itself: the same statistics as its conversion to Intel PT, titled as a
# branch trace
"$TK" stats "$work/lj.tkbt" >"$work/bt.txt"
head -1 "$work/bt.txt" | grep -q 'lj.tkbt: branch trace, 1 thread$' ||
	{ echo "branch trace: title '$(head -1 "$work/bt.txt")'"; exit 1; }
"$TK" stats "${elfargs[@]}" "$work/lj.pt" >"$work/stats.txt"
cmp -s <(tail -n +2 "$work/bt.txt") <(tail -n +2 "$work/stats.txt") ||
	{ echo "branch trace: stats differ from its Intel PT's"; diff "$work/bt.txt" "$work/stats.txt"; exit 1; }
# threads: all of them add up to each one (--tid), and each one is what decode counts
cc -O1 -pthread -o "$work/thr" "$SRC/tests/data/btrace/threads.c"
"$TK" record --btrace -q -o "$work/thr.tkbt" -- "$work/thr" >/dev/null
"$TK" stats "$work/thr.tkbt" >"$work/stats.txt"
head -1 "$work/stats.txt" | grep -q ', 5 threads$' || { echo "threads: $(head -1 "$work/stats.txt")"; exit 1; }
all=$(get total) sum=0
for t in $("$TK" info "$work/thr.tkbt" | awk '$1 == "thread" {sub(":", "", $2); print $2}'); do
	"$TK" stats --tid "$t" "$work/thr.tkbt" >"$work/stats.txt"
	one=$(get total)
	check "thread $t" "$one" "$("$TK" decode --stat --tid "$t" "$work/thr.tkbt" | awk '$1 == "insn:" {print $2}')"
	sum=$((sum + one))
done
check "threads: the sum of each" "$all" "$sum"
# a truncated branch trace: the damage named with its offset, what is left counted, exit 1
head -c $(( $(stat -c %s "$work/lj.tkbt") * 2 / 3 )) "$work/lj.tkbt" >"$work/cut.tkbt"
rc=0
"$TK" stats "$work/cut.tkbt" >"$work/stats.txt" 2>"$work/cut.err" || rc=$?
[ $rc = 1 ] && grep -q 'cut.tkbt: offset 0x[0-9a-f]*: damaged or truncated record' "$work/cut.err" &&
	grep -q 'cut.tkbt: [0-9]* gaps\?, [0-9]* bytes skipped' "$work/cut.err" ||
	{ echo "truncated branch trace: exit $rc"; cat "$work/cut.err"; exit 1; }
[ "$(get total)" -gt 0 ] && [ "$(get total)" -lt "$(truth total)" ] ||
	{ echo "truncated branch trace: $(get total) instructions of $(truth total)"; exit 1; }

echo "ipt stats: ok ($(truth total) instructions, $(truth taken) / $(truth not_taken) conditionals taken / not)"
