#!/usr/bin/env bash
# Intel PT in perf.data, against perf's own decoder. The machine has no PT, so the trace is a
# recorded run of a real program (tests/data/seams/lj.c over libc) converted to what the
# hardware would write, and tests/tools/mkperf.py wraps it as `perf record -e intel_pt//u`
# does: AUXTRACE_INFO, MMAP2 for the code, the trace in AUXTRACE buffers of about 4 KiB
# ending at packet boundaries (where the hardware's output stops), one queue per CPU.
# - `perf script --itrace=i0ns` and `tracekit decode --no-disasm` list the same instruction
#   addresses, CPU by CPU, with one queue and with two; neither is given the code: both
#   read the mappings. Both as perf decodes a session "timeless" (no TSC conversion to its
#   clock: it ignores the times of the sideband records) and timed, as real sessions are
#   (mkperf.py --timed); timed, each instruction's time too (`perf script --ns -F time`
#   and `tracekit decode --time`, to the nanosecond, with perf's time_zero and a TSC
#   that is not 1 GHz); and a thread migrating between CPUs, told apart by switch records
# - the profile from perf.data is the profile of the raw trace with --elf; its times are in
#   microseconds when perf gives the TSC's conversion to its clock; per queue, rows are
#   named by CPU; per-thread buffers by thread (and perf script's instructions)
# - a lost buffer: an error naming the file offset, exit status 1, and the decoding in two
#   pieces, each what the program executed (tests/tools/ptsegments.py)
# - snapshot mode: overlaps joined, the rest in pieces; perf's instructions
# - convert --to ipt: each queue's raw stream, a loss an OVF
# - a file cut inside a buffer: the instructions up to the cut, exit status 1
# - the code mappings of real perf record sessions, plain and -z (zstd), as perf lists them,
#   and their build-ids; a file whose build-id differs from the recorded one is left out
# - code mappings that overlap other code are named
# - the vDSO's code comes from this machine when the session ran on this kernel
# - the kernel: `--elf vmlinux` is placed where the session's kernel ran (KASLR), as perf
#   script --vmlinux places it; a vmlinux of another build is left out; without one a
#   warning says the kernel was traced; perf record --kcore's directory: the kernel's code
#   as it ran and its kallsyms, as perf script reads them
# - perf record --threads directories: DIR/data.K read with DIR/data
# (A command's output is searched as grep -q P <(CMD), not CMD | grep -q P: grep leaving at
# the first match would end CMD with SIGPIPE, a failure under pipefail when CMD writes on.)
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v perf >/dev/null || { echo "perf missing: scripts/install-deps.sh installs linux-perf"; exit 1; }
cc -O1 -o "$work/lj" "$SRC/tests/data/seams/lj.c"
libc=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
# TK_BTRACE_CALL_TIMES=0: TSCs only where tracing resumes. The per-call TSCs (before every
# TIP) sit between the last TNT and a TIP, where perf script and tracekit (as libipt) place
# the time differently (perf from the transfer's target on, tracekit from the instructions
# after the last conditional branch); this compares the decoders where they agree.
TK_BTRACE_CALL_TIMES=0 "$TK" record --btrace -o "$work/lj.tkbt" --module main --module "$libc" -- "$work/lj" \
	>/dev/null 2>"$work/rec.err" || { echo "record failed"; cat "$work/rec.err"; exit 1; }
"$TK" convert --to ipt -q -o "$work/lj.pt" "$work/lj.tkbt"
mods=$("$TK" info "$work/lj.tkbt" | awk '$1 == "module" {
	for (i = 3; i < NF; i++) if ($i == "bias") printf "%s:%s ", $2, $(i + 1) }')
[ "$(wc -w <<<"$mods")" = 2 ] || { echo "want 2 modules, got: $mods"; exit 1; }
modargs=() elfargs=()
for m in $mods; do modargs+=(--module "$m"); elfargs+=(--elf "$m"); done
"$TK" dump "$work/lj.pt" >"$work/lj.dump"
mk() { python3 "$SRC/tests/tools/mkperf.py" "$@" --packets "$work/lj.dump" "${modargs[@]}"; }
mk "$work/one.data" --queue 0:4242:"$work/lj.pt"
mk "$work/two.data" --queue 0:4242:"$work/lj.pt" --queue 3:4242:"$work/lj.pt"
# timed: one queue at 1 tick = 1 ns; two queues of two threads (the second one's FORK
# recorded) with a 2.9 GHz TSC and perf's clock starting at time_zero
mk "$work/tone.data" --timed --queue 0:4242:"$work/lj.pt"
mk "$work/ttwo.data" --timed --tsc-hz 2900000000 --time-zero 1700000000123456789 \
	--queue 0:4242:"$work/lj.pt" --queue 3:4243:"$work/lj.pt"
nbuf=$(perf report -D -i "$work/one.data" 2>/dev/null | grep -c 'PERF_RECORD_AUXTRACE size' || true)
[ "$nbuf" -ge 10 ] || { echo "only $nbuf trace buffers: the joins are not tested"; exit 1; }

# CPU and address of each instruction, CPU by CPU in order (perf's lines interleave CPUs);
# with a second argument "time", the CPU, the time (seconds.nanoseconds) and the address
perf_ips() {
	perf script -i "$1" --itrace=i0ns --ns -F cpu,${2:+time,}ip 2>"$work/perf.err" |
		awk '{ c = $1; gsub(/[][]/, "", c); $1 = ""; sub(/: /, " "); printf "%d%s\n", c, $0 }' |
		sort -s -n -k1,1
}
dec_opts=()   # more options of tk_ips's decode
tk_ips() {
	"$TK" decode --no-disasm ${2:+--time} "${dec_opts[@]}" "$1" | awk -v time="${2:-}" '
		/^\[.*\[cpu [0-9]+(, pid [0-9]+, tid [0-9]+)?\]: [0-9]+ bytes of trace\]$/ { match($0, /cpu [0-9]+/);
			c = substr($0, RSTART + 4, RLENGTH - 4); next }
		time && $2 ~ /^\[/ || !time && /^\[/ { next }
		time { t = $1; gsub(/[][]/, "", t); a = $2; sub(/^0+/, "", a); printf "%d %s %s\n", c, t, a; next }
		{ a = $1; sub(/^0+/, "", a); printf "%d %s\n", c, a }'
}
for f in one two tone ttwo; do
	perf_ips "$work/$f.data" >"$work/$f.perf"
	tk_ips "$work/$f.data" >"$work/$f.tk"
	[ -s "$work/$f.perf" ] || { echo "$f: perf decoded nothing"; cat "$work/perf.err"; exit 1; }
	cmp -s "$work/$f.perf" "$work/$f.tk" || {
		echo "$f.data: tracekit and perf differ ($(wc -l <"$work/$f.tk") and" \
			"$(wc -l <"$work/$f.perf") instructions)"
		diff "$work/$f.perf" "$work/$f.tk" | head -10 || true; exit 1; }
done
for f in tone ttwo; do   # timed: the same instructions as timeless, at perf's times
	cmp -s "$work/${f#t}.tk" "$work/$f.tk" || { echo "$f.data: not ${f#t}.data's instructions"; exit 1; }
	perf_ips "$work/$f.data" time >"$work/$f.perf"
	tk_ips "$work/$f.data" time >"$work/$f.tk"
	[ "$(awk '{print $2}' "$work/$f.perf" | sort -u | wc -l)" -gt 100 ] ||
		{ echo "$f.data: perf decoded it timeless"; head -3 "$work/$f.perf"; exit 1; }
	cmp -s "$work/$f.perf" "$work/$f.tk" || { echo "$f.data: times differ from perf's";
		diff "$work/$f.perf" "$work/$f.tk" | head -10 || true; exit 1; }
done
# a thread that migrates between CPUs (0, 3, 0, 3) in a timed session: its trace in pieces
# on each CPU's queue, each piece closed with FUP + TIP.PGD where the next one begins, and
# PERF_RECORD_SWITCH records saying where it ran: perf's instructions and times per CPU,
# perf gives them all to the thread, and the pieces in time order are the whole run
mk "$work/mig.data" --timed --migrate 0,3,0,3 --queue 0:4242:"$work/lj.pt"
perf_ips "$work/mig.data" time >"$work/mig.perf"
tk_ips "$work/mig.data" time >"$work/mig.tk"
[ "$(grep -c '^3 ' "$work/mig.perf")" -gt 1000 ] && cmp -s "$work/mig.perf" "$work/mig.tk" ||
	{ echo "migrating thread: tracekit and perf differ"; diff "$work/mig.perf" "$work/mig.tk" | head; exit 1; }
[ "$(perf script -i "$work/mig.data" --itrace=i0ns -F tid 2>/dev/null | sort -u | tr -d ' ')" = 4242 ] ||
	{ echo "migrating thread: perf did not follow the switches"; exit 1; }
sort -s -n -k2,2 "$work/mig.tk" | cut -d' ' -f3 | cmp -s - <(cut -d' ' -f2 "$work/one.tk") ||
	{ echo "migrating thread: its pieces in time order are not the whole run"; exit 1; }
n1=$(wc -l <"$work/one.tk")
[ "$(wc -l <"$work/two.tk")" = $((2 * n1)) ] || { echo "two queues: not twice one"; exit 1; }
[ "$(cut -d' ' -f1 "$work/two.tk" | sort -u | tr '\n' ' ')" = "0 3 " ] ||
	{ echo "two queues: want CPUs 0 and 3"; exit 1; }
# a damaged record header in the middle of two.data (CPU 3's fifth trace buffer: its size
# 0, or a type perf does not know): named with its offset and the bytes skipped, reading
# goes on at the next record (the AUX after the buffer), exit status 1; CPU 0's trace is
# whole, CPU 3's goes on from the next PSB after the lost buffer as the whole file's does
after_gap() { "$TK" decode --no-disasm "$1" 2>/dev/null | awk -v c="$2" '
	/^\[.*\[cpu [0-9]+\]: [0-9]+ bytes of trace\]$/ { on = index($0, "[cpu " c "]") > 0; next }
	on && /^\[overflow/ { gap = 1; next }
	on && gap && !/^\[/ { a = $1; sub(/^0+/, "", a); print c, a }'; }
dmg=$(perf report -D -i "$work/two.data" 2>/dev/null |
	awk '/PERF_RECORD_AUXTRACE .*cpu: 3$/ && ++n == 5 {print $3}')
[ -n "$dmg" ] || { echo "damage: no fifth buffer of CPU 3"; exit 1; }
for patch in '6:\x00\x00' '0:\xff\x7f\x00\x00'; do
	cp "$work/two.data" "$work/dmg.data"
	printf "${patch#*:}" | dd of="$work/dmg.data" bs=1 seek=$((dmg + ${patch%%:*})) conv=notrunc status=none
	rc=0
	tk_ips "$work/dmg.data" >"$work/dmg.tk" 2>"$work/dmg.err" || rc=$?
	[ $rc = 1 ] && grep -q "dmg.data: offset $dmg: record of type [0-9]* with size [0-9]* .*: [0-9]* bytes skipped to the next record, at offset 0x" "$work/dmg.err" ||
		{ echo "damaged header ($patch): exit $rc"; cat "$work/dmg.err"; exit 1; }
	cmp -s <(grep '^0 ' "$work/dmg.tk") <(grep '^0 ' "$work/two.tk") ||
		{ echo "damaged header ($patch): CPU 0's trace is not whole"; exit 1; }
	after_gap "$work/dmg.data" 3 >"$work/dmg.after" || true
	na=$(wc -l <"$work/dmg.after")
	[ "$na" -gt $((n1 / 2)) ] && grep '^3 ' "$work/two.tk" | tail -n "$na" | cmp -s - "$work/dmg.after" ||
		{ echo "damaged header ($patch): CPU 3 after the loss: $na instructions, not the end of the file's"; exit 1; }
	rc=0   # dump: both queues' packets, the damage named, exit status 1
	"$TK" dump "$work/dmg.data" >"$work/dmg.dump" 2>"$work/dmg.err" || rc=$?
	[ $rc = 1 ] && grep -q "dmg.data: offset $dmg: record of type" "$work/dmg.err" &&
		[ "$(grep -c '^\[.*/dmg.data \[cpu [03]\]: [0-9]* bytes of trace\]$' "$work/dmg.dump")" = 2 ] &&
		[ "$(grep -c ' tip ' "$work/dmg.dump")" -gt "$(grep -c ' tip ' "$work/lj.dump")" ] ||
		{ echo "damaged header ($patch): dump exit $rc"; cat "$work/dmg.err"; exit 1; }
done
# perf record --threads: DIR/data has the header, DIR/data.K the writer threads' records
# (here the code mappings in data.0, each queue's buffers in data.<queue mod 2>); read
# together they are the session of two.data, which perf script checked above: the same
# instructions, profile and statistics (perf 6.1's own reader does not get past the first
# trace buffer of such a directory, so two.data is the reference)
mk "$work/thr.dir" --threads 2 --queue 0:4242:"$work/lj.pt" --queue 3:4242:"$work/lj.pt"
[ -s "$work/thr.dir/data.1" ] && ! grep -q 'AUXTRACE' <(perf report -D -i "$work/thr.dir/data" 2>/dev/null | grep -v AUXTRACE_INFO) ||
	{ echo "--threads: the directory is not laid out as perf record --threads"; exit 1; }
tk_ips "$work/thr.dir" | cmp -s - "$work/two.tk" || { echo "--threads: not two.data's instructions"; exit 1; }
for c in "profile --to csv" stats; do
	cmp -s <("$TK" $c "$work/thr.dir" | sed 's/thr\.dir/X/') <("$TK" $c "$work/two.data" | sed 's/two\.data/X/') ||
		{ echo "--threads: $c differs from two.data's"; exit 1; }
done
grep -q 'parts:    2 files of perf record --threads' <("$TK" info "$work/thr.dir") &&
	grep -q 'queue 1:  cpu 3, .*(first at offset 0x[0-9a-f]* of data.1)' <("$TK" info "$work/thr.dir") ||
	{ echo "--threads: info"; "$TK" info "$work/thr.dir"; exit 1; }
# a damaged record in a part is named with the part and its offset in it
printf '\x00\x00' | dd of="$work/thr.dir/data.1" bs=1 seek=6 conv=notrunc status=none
rc=0
"$TK" decode --no-disasm "$work/thr.dir" >/dev/null 2>"$work/thr.err" || rc=$?
[ $rc = 1 ] && grep -q 'thr.dir: offset 0x0: in data.1: record of type [0-9]* with size 0' "$work/thr.err" ||
	{ echo "--threads: damaged part: exit $rc"; cat "$work/thr.err"; exit 1; }
# ... and data.0 (CPU 0's buffers and the mappings) is still read whole, and data.1 from
# the record after the damaged one
tk_ips "$work/thr.dir" 2>/dev/null >"$work/thr.tk" || true
cmp -s <(grep '^0 ' "$work/thr.tk") <(grep '^0 ' "$work/two.tk") ||
	{ echo "--threads: damaged data.1 cost CPU 0's trace"; exit 1; }
n3=$(grep -c '^3 ' "$work/thr.tk" || true)
[ "$n3" -gt $((n1 / 2)) ] && cmp -s <(grep '^3 ' "$work/two.tk" | tail -n "$n3") <(grep '^3 ' "$work/thr.tk") ||
	{ echo "--threads: damaged data.1: CPU 3 not read on after the damage ($n3 instructions)"; exit 1; }

# the same instructions as the raw trace decoded with --elf (buffers end at packets, not
# at 8 bytes: perf pads each one and steps its offset by the data only, so the joins test
# that the padding is not taken for lost trace)
"$TK" decode --no-disasm "${elfargs[@]}" "$work/lj.pt" >"$work/truth.txt"
grep -v '^\[' "$work/truth.txt" | awk '{ a = $1; sub(/^0+/, "", a); print "0 " a }' >"$work/raw.tk"
cmp -s "$work/raw.tk" "$work/one.tk" || { echo "perf.data and the raw trace differ"; exit 1; }

# profiles: from perf.data (symbols of the mapped files) and from the raw trace with --elf
"$TK" profile --to csv "$work/one.data" >"$work/one.csv"
"$TK" profile --to csv "${elfargs[@]}" "$work/lj.pt" >"$work/raw.csv"
cmp -s "$work/one.csv" "$work/raw.csv" || { echo "profile of perf.data differs";
	diff "$work/raw.csv" "$work/one.csv" | head; exit 1; }
# timed at 1 tick = 1 ns: the same profile, its times in microseconds (to the nanosecond)
ticks() { awk -F, -v OFS=, 'FNR > 1 { for (i = 3; i <= NF; i++) if (i != 5 && i != 6) {
	gsub(/\./, "", $i); $i += 0 } } 1' "$@"; }
"$TK" profile --to csv "$work/tone.data" >"$work/tone.csv"
head -2 "$work/tone.csv" | grep -q '^"[^"]*",[0-9]*,[0-9]*\.[0-9][0-9][0-9],' &&
	cmp -s <(ticks "$work/one.csv") <(ticks "$work/tone.csv") ||
	{ echo "profile of the timed perf.data differs"; diff "$work/one.csv" "$work/tone.csv" | head; exit 1; }
"$TK" profile --to csv "$work/two.data" >"$work/two.csv"
calls() { awk -F, -v n="\"$2\"" '$1 == n {print $2}' "$1"; }
[ "$(calls "$work/two.csv" deep)" = $((2 * $(calls "$work/one.csv" deep))) ] ||
	{ echo "two queues: deep's calls not doubled"; exit 1; }
# per queue: rows of CPUs 0 and 3 (as perf names them), each the one queue's
"$TK" profile --threads --to csv "$work/two.data" >"$work/two-cpus.csv"
head -1 "$work/two-cpus.csv" | grep -q '^cpu,function,calls,' || { echo "--threads: no cpu column"; exit 1; }
for c in 0 3; do
	[ "$(awk -F, -v c=$c '$1 == c && $2 == "\"deep\"" {print $3}' "$work/two-cpus.csv")" = "$(calls "$work/one.csv" deep)" ] ||
		{ echo "--threads: cpu $c: deep's calls are not one queue's"; exit 1; }
done
"$TK" profile --threads --to folded -o "$work/two.folded" "$work/two.data"
grep -q '^cpu 3;' "$work/two.folded" || { echo "folded: no cpu 3 stacks"; exit 1; }

# per-thread buffers (perf record --per-thread): queues named, profiled and extracted by
# thread; perf script decodes the thread whose process it knows (4242) to the same
# instructions
python3 "$SRC/tests/tools/mkperf.py" "$work/per.data" --per-thread --queue=-1:4242:"$work/lj.pt" \
	--queue=-1:4243:"$work/lj.pt" --packets "$work/lj.dump" "${modargs[@]}"
"$TK" profile --threads --to csv "$work/per.data" >"$work/per.csv"
for t in 4242 4243; do
	[ "$(awk -F, -v t=$t '$1 == t && $2 == "\"deep\"" {print $3}' "$work/per.csv")" = "$(calls "$work/one.csv" deep)" ] ||
		{ echo "per-thread: thread $t: deep's calls are not one queue's"; head -3 "$work/per.csv"; exit 1; }
done
"$TK" decode --no-disasm "$work/per.data" | awk '/^\[.*\[thread [0-9]+\]: [0-9]+ bytes of trace\]$/ {
	t = $0; sub(/.*\[thread /, "", t); sub(/\].*/, "", t); next } /^\[/ { next } t == 4242 {
	a = $1; sub(/^0+/, "", a); print a }' >"$work/per.tk"
perf script -i "$work/per.data" --itrace=i0ns -F tid,ip 2>/dev/null | awk '$1 == 4242 {print $2}' >"$work/per.perf"
[ -s "$work/per.perf" ] && cmp -s "$work/per.perf" "$work/per.tk" ||
	{ echo "per-thread: thread 4242 differs from perf ($(wc -l <"$work/per.tk") and $(wc -l <"$work/per.perf"))"; exit 1; }
"$TK" convert -q --to ipt -o "$work/per.pt" "$work/per.data"
head -c "$(stat -c %s "$work/lj.pt")" "$work/per.pt.thread4243" | cmp -s - "$work/lj.pt" ||
	{ echo "per-thread: per.pt.thread4243 is not the trace"; exit 1; }

# --cpu LIST (perf's spelling): only those CPUs' queues, perf's instructions on those CPUs
# (perf script -C refuses CPUs above the header's count, which mkperf.py does not write),
# for queues (two.data: CPUs 0 and 3) and a thread split by its switches (mig.data); -j 2
# as -j 1; FAMILY/MODEL (with a '/') still names a processor; refused without CPUs
for f in two mig; do
	for c in 3:3 0,3:0,3 0-3:0,3 1-2:; do
		want=${c#*:}; c=${c%%:*}
		perf_ips "$work/$f.data" | awk -v w=",$want," 'index(w, "," $1 ",")' >"$work/c.perf"
		dec_opts=(--cpu "$c")
		tk_ips "$work/$f.data" >"$work/c.tk" 2>/dev/null
		dec_opts=()
		cmp -s "$work/c.perf" "$work/c.tk" && { [ "$c" = 1-2 ] || [ -s "$work/c.tk" ]; } ||
			{ echo "$f.data --cpu $c: not perf's instructions on CPUs '$want'"; diff "$work/c.perf" "$work/c.tk" | head -5; exit 1; }
	done
	"$TK" profile --to csv -j 1 --cpu 3 "$work/$f.data" >"$work/c1.csv"
	TK_IPT_CHUNK=4096 "$TK" profile --to csv -j 2 --cpu 3 "$work/$f.data" | cmp -s - "$work/c1.csv" &&
		! "$TK" profile --to csv "$work/$f.data" | cmp -s - "$work/c1.csv" ||
		{ echo "$f.data: profile --cpu 3: -j 2 differs from -j 1, or it is the whole profile"; exit 1; }
done
# CPUs with no trace: said so, naming those that have some (not "all empty"), exit 0
"$TK" decode --no-disasm --cpu 1-2 "$work/two.data" 2>"$work/c.err" >/dev/null &&
	grep -q -- '--cpu LIST: no trace of those CPUs (the trace is of CPUs 0, 3)' "$work/c.err" ||
	{ echo "decode --cpu 1-2: no message naming CPUs 0 and 3"; cat "$work/c.err"; exit 1; }
# stats takes the CPUs too: perf's instructions on CPU 3
[ "$("$TK" stats --cpu 3 "$work/two.data" | awk '$1 == "total" { print $2 }')" = \
	"$(perf_ips "$work/two.data" | awk '$1 == 3' | wc -l)" ] ||
	{ echo "stats --cpu 3: not perf's count on CPU 3"; exit 1; }
"$TK" decode --no-disasm --cpu 6/158 "$work/two.data" | cmp -s - <("$TK" decode --no-disasm "$work/two.data") ||
	{ echo "--cpu FAMILY/MODEL: not the decode without it"; exit 1; }
for bad in "decode --cpu 0 $work/lj.pt" "profile --cpu 0 $work/lj.pt" "decode --cpu 0 $work/per.data" \
	   "profile --cpu 0 $SRC/tests/data/xray/basic-v1.xray" "decode --cpu 2-1 $work/two.data" \
	   "decode --cpu x $work/two.data"; do
	rc=0
	# shellcheck disable=SC2086
	"$TK" $bad >/dev/null 2>"$work/c.err" || rc=$?
	[ $rc = 2 ] && grep -q -- '--cpu' "$work/c.err" || { echo "tracekit $bad: exit $rc, want 2 and a message"; cat "$work/c.err"; exit 1; }
done

# perf's conversion of TSC ticks to its clock gives times in microseconds: each function's
# inclusive time is the raw trace's ticks over the TSC's 2 GHz, cut to whole nanoseconds
# (not rounded: an odd tick count ends in half a nanosecond)
mk "$work/clock.data" --queue 0:4242:"$work/lj.pt" --tsc-hz 2000000000
grep -q 'times in us (2000000000 ticks/s)' <("$TK" profile "$work/clock.data" 2>/dev/null | head -1) ||
	{ echo "perf clock: the profile is not in microseconds"; exit 1; }
"$TK" profile --to csv "$work/clock.data" >"$work/clock.csv"
awk -F, 'NR == FNR { if (FNR > 1) raw[$1] = $3; next }
	FNR > 1 { n++; ns = int(raw[$1] / 2); want = sprintf("%d.%03d", int(ns / 1000), ns % 1000)
		if (raw[$1] == "") want = ""   # no time measured (no TSC inside): "" in both
		if ($3 != want) { bad++;
		print "perf clock: " $1 " " $3 " us, want " want } }
	END { exit !(n > 10 && !bad) }' "$work/raw.csv" "$work/clock.csv" ||
	{ echo "perf clock: times differ from the raw trace's ticks"; exit 1; }

# a timeline names each queue's track after its CPU; without --to it is Perfetto's
"$TK" convert --to chrome -o "$work/two.json" "$work/two.data"
"$TK" convert -o "$work/two.pftrace" "$work/two.data"
"$TK" convert --to perfetto -o "$work/two2.pftrace" "$work/two.data"
[ -s "$work/two.pftrace" ] && cmp -s "$work/two.pftrace" "$work/two2.pftrace" ||
	{ echo "convert without --to: not the Perfetto timeline"; exit 1; }
for c in 0 3; do
	grep -q "\"name\":\"cpu $c\"" "$work/two.json" || { echo "timeline: no track cpu $c"; exit 1; }
done

# a lost buffer (the fourth): reported with its offset, the rest decoded
mk "$work/hole.data" --queue 0:4242:"$work/lj.pt" --drop 3
rc=0
"$TK" decode --no-disasm "$work/hole.data" >"$work/hole.txt" 2>"$work/hole.err" || rc=$?
[ $rc = 1 ] || { echo "lost buffer: exit status $rc, want 1"; exit 1; }
# the gap summary names the queue its offsets belong to
grep -q 'hole.data \[cpu 0\]: 1 gap, 0 bytes skipped (first at offset 0x' "$work/hole.err" ||
	{ echo "lost buffer: the gap summary does not name the queue"; cat "$work/hole.err"; exit 1; }
grep -q 'hole.data: offset 0x[0-9a-f]*: queue 0: [0-9]* bytes of trace lost before this buffer' "$work/hole.err" ||
	{ echo "lost buffer: no message with the offset"; cat "$work/hole.err"; exit 1; }
rc=0   # dump reports it too
"$TK" dump "$work/hole.data" >/dev/null 2>"$work/hdump.err" || rc=$?
[ $rc = 1 ] && grep -q 'hole.data: offset 0x[0-9a-f]*: queue 0: [0-9]* bytes of trace lost' "$work/hdump.err" ||
	{ echo "lost buffer: dump exit $rc, no message"; cat "$work/hdump.err"; exit 1; }
nh=$(grep -vc '^\[' "$work/hole.txt")
[ "$nh" -lt "$n1" ] && [ "$nh" -gt $((n1 / 2)) ] || { echo "lost buffer: $nh of $n1 instructions"; exit 1; }
# the decoding stops at the loss and starts again at the next PSB: both pieces are what the
# program executed (perf 6.1 joins the buffers and decodes the bytes before that PSB:
# "Trace doesn't match instruction")
grep -q '^\[overflow at offset 0x' "$work/hole.txt" || { echo "lost buffer: no gap in the listing"; exit 1; }
python3 "$SRC/tests/tools/ptsegments.py" "$work/truth.txt" "$work/hole.txt" >"$work/seg.out" ||
	{ echo "lost buffer: $(cat "$work/seg.out")"; exit 1; }
grep -q '^2 pieces' "$work/seg.out" || { echo "lost buffer: $(cat "$work/seg.out")"; exit 1; }

# the raw streams in perf.data for libipt's tools (convert --to ipt): each queue byte for
# byte (perf pads the last buffer with up to 7 zero bytes, PAD packets), with the code
# spelled for --elf; a loss is an OVF, and a packet the loss cut off is left out (buffers
# of 4007 bytes end inside packets), so the stream decodes in the same two pieces
"$TK" convert --to ipt -o "$work/x.pt" "$work/two.data" 2>"$work/x.err"
for c in 0 3; do
	head -c "$(stat -c %s "$work/lj.pt")" "$work/x.pt.cpu$c" | cmp -s - "$work/lj.pt" &&
		[ -z "$(tail -c +$(($(stat -c %s "$work/lj.pt") + 1)) "$work/x.pt.cpu$c" | tr -d '\0')" ] ||
		{ echo "convert --to ipt: cpu $c is not the raw trace"; exit 1; }
done
read -ra xelf < <(sed -n 's/^tracekit: the code: //p' "$work/x.err")
[ "${xelf[*]}" = "${elfargs[*]}" ] || { echo "convert --to ipt: code '${xelf[*]}', want '${elfargs[*]}'"; exit 1; }
python3 "$SRC/tests/tools/mkperf.py" "$work/cut.data" --queue 0:4242:"$work/lj.pt" "${modargs[@]}" \
	--drop 3 --buffer 4007
rc=0
"$TK" convert --to ipt -o "$work/cut.pt" "$work/cut.data" 2>"$work/cut.err" || rc=$?
[ $rc = 1 ] && grep -q '1 losses marked with OVF (packets cut off there left out)' "$work/cut.err" ||
	{ echo "convert --to ipt of a loss: exit $rc"; cat "$work/cut.err"; exit 1; }
"$TK" decode --no-disasm "${elfargs[@]}" "$work/cut.pt" >"$work/cut.txt" 2>/dev/null || true
# (tracing switched off and on again: [enabled], [disabled], [resumed] at the same IP)
[ "$(grep '^\[' "$work/cut.txt" | grep -cEv '(abled|resumed)\]$')" = 1 ] && grep -q '^\[overflow' "$work/cut.txt" ||
	{ echo "convert --to ipt of a loss: not one overflow"; grep '^\[' "$work/cut.txt" | grep -Ev '(abled|resumed)\]$' | head; exit 1; }
python3 "$SRC/tests/tools/ptsegments.py" "$work/truth.txt" "$work/cut.txt" >"$work/seg.out" &&
	grep -q '^2 pieces' "$work/seg.out" || { echo "convert --to ipt of a loss: $(cat "$work/seg.out")"; exit 1; }

# snapshot mode (perf record -S): each snapshot is what the ring held, so it repeats part of
# the one before or starts after a stretch that was never kept. Overlaps are joined where a
# PSB of the older one is in the newer one (as perf finds them), or where no PSB is in the
# overlap but the offsets say it and the bytes agree (perf starts such a snapshot over at
# its first PSB and loses what came before); the rest are pieces.
# - rings larger than the step between snapshots: the whole trace, exactly, once
# - smaller or barely overlapping: pieces of what ran; perf's instructions are tracekit's
#   with stretches left out (`diff --minimal`: no line of perf's alone; at most a stretch a
#   snapshot), and so are the instructions of the stream `convert --to ipt` extracts
# (no ring of a multiple of 4096 bytes here: buffer edges lie near such multiples, and two
# snapshots could then be exactly adjacent; that case follows)
addrs() { awk '!/^\[/ { a = $1; sub(/^0+/, "", a); print a }' "$1"; }
# within WHAT A B N: B's lines are A's with at most N stretches left out
within() {
	local h
	h=$(diff --minimal "$2" "$3" | grep -v '^[<>-]' || true)
	[ -z "$h" ] || { ! grep -qv '^[0-9,]*d[0-9,]*$' <<<"$h" && [ "$(grep -c . <<<"$h")" -le "$4" ]; } ||
		{ echo "$1: not the same instructions with stretches left out"; head -5 <<<"$h"; exit 1; }
}
for cfg in 20000:3000 8000:6000 3000:2500; do
	mk "$work/snap.data" --queue 0:4242:"$work/lj.pt" --snapshot "$cfg"
	perf script -i "$work/snap.data" --itrace=i0ns -F ip 2>"$work/perf.err" | awk '{print $1}' >"$work/snap.perf"
	nsnap=$(perf report -D -i "$work/snap.data" 2>/dev/null | grep -c 'PERF_RECORD_AUXTRACE size' || true)
	rc=0
	"$TK" decode --no-disasm "$work/snap.data" >"$work/snap.txt" 2>"$work/snap.err" || rc=$?
	[ $rc = 0 ] || { echo "snapshots $cfg: exit status $rc"; cat "$work/snap.err"; exit 1; }
	python3 "$SRC/tests/tools/ptsegments.py" "$work/truth.txt" "$work/snap.txt" \
		>"$work/seg.out" || { echo "snapshots $cfg: $(cat "$work/seg.out")"; exit 1; }
	addrs "$work/snap.txt" >"$work/snap.tk"
	within "snapshots $cfg: perf" "$work/snap.tk" "$work/snap.perf" "$nsnap"
	# extracted (convert --to ipt: each snapshot gap an OVF), the raw stream decodes to the
	# same pieces; it has what perf has, and tracekit's decoding of the perf.data has what
	# it has (that one walks on at a gap to the next instruction that needs a packet, as
	# libipt does; at an OVF both stop)
	"$TK" convert -q --to ipt -o "$work/snap.pt" "$work/snap.data"
	"$TK" decode --no-disasm "${elfargs[@]}" "$work/snap.pt" >"$work/snap-raw.txt" 2>/dev/null || true
	python3 "$SRC/tests/tools/ptsegments.py" "$work/truth.txt" "$work/snap-raw.txt" \
		>"$work/seg2.out" || { echo "snapshots $cfg: extracted: $(cat "$work/seg2.out")"; exit 1; }
	addrs "$work/snap-raw.txt" >"$work/snap-raw.tk"
	within "snapshots $cfg: extracted, perf" "$work/snap-raw.tk" "$work/snap.perf" "$nsnap"
	within "snapshots $cfg: extracted" "$work/snap.tk" "$work/snap-raw.tk" "$nsnap"
	np=$(awk 'NR == 1 {print $1}' "$work/seg.out")
	if [ "$cfg" = 20000:3000 ]; then
		grep -v '^\[' "$work/snap.txt" | cmp -s - <(grep -v '^\[' "$work/truth.txt") ||
			{ echo "overlapping snapshots: not the whole trace once"; exit 1; }
		grep -q 'bytes repeating earlier snapshots left out' <("$TK" info "$work/snap.data") ||
			{ echo "overlapping snapshots: info says nothing of the overlaps"; exit 1; }
	else
		[ "$np" -gt 2 ] || { echo "snapshots $cfg: want pieces, got $np"; exit 1; }
		grep -q 'snapshot mode: [0-9]* snapshots do not overlap the one before' "$work/snap.err" ||
			{ echo "snapshots $cfg: no note of the pieces"; cat "$work/snap.err"; exit 1; }
	fi
done

# an overlap with no PSB in it, every time: two snapshots, the first [0, E) with E a packet
# edge halfway between the trace's second and third PSBs, the second from 200 bytes before
# E to the end. The offsets say the 200 bytes repeat and they do: the whole trace, once.
# perf finds no PSB of the first in the second and starts it over at its first PSB: it
# loses the instructions of [E, that PSB)
read -r p1 p2 edge <<<"$(python3 -c '
import sys
offs = [(int(l.split()[0], 16), l.split()[1]) for l in open(sys.argv[1]) if l.strip()]
p1, p2 = [o for o, what in offs if what == "psb"][1:3]
print(p1, p2, next(o for o, _ in offs if o >= (p1 + p2) // 2))' "$work/lj.dump")"
[ -n "$p2" ] && [ $((p2 - p1)) -gt 1000 ] && [ "$edge" -lt $((p2 - 300)) ] ||
	{ echo "no PSBs far enough apart for the overlap case: $p1 $p2 $edge"; exit 1; }
size=$(( $(stat -c %s "$work/lj.pt") - edge + 200 ))
mk "$work/gap.data" --queue 0:4242:"$work/lj.pt" --snapshot "$size:@$edge"
rc=0
"$TK" decode --no-disasm "$work/gap.data" >"$work/gap.txt" 2>"$work/gap.err" || rc=$?
[ $rc = 0 ] && [ ! -s "$work/gap.err" ] && cmp -s <(grep -v '^\[' "$work/gap.txt") <(grep -v '^\[' "$work/truth.txt") ||
	{ echo "an overlap without a PSB: not the whole trace once (exit status $rc)"; cat "$work/gap.err"; exit 1; }
grep -q ', 200 bytes repeating earlier snapshots left out' <("$TK" info "$work/gap.data") ||
	{ echo "an overlap without a PSB: info does not say the 200 bytes"; "$TK" info "$work/gap.data"; exit 1; }
np=$(perf script -i "$work/gap.data" --itrace=i0ns -F ip 2>/dev/null | wc -l)
[ "$np" -gt 0 ] && [ "$np" -lt "$n1" ] ||
	{ echo "an overlap without a PSB: perf decoded $np of $n1 instructions (it used to lose some)"; exit 1; }
# one snapshot, of all but the trace's first 200 bytes: it begins inside a packet and is
# decoded from its first PSB (the trace's second); the note says so (not "0 snapshots apart")
ptlen=$(stat -c %s "$work/lj.pt")
mk "$work/gap2.data" --queue 0:4242:"$work/lj.pt" --snapshot "$((ptlen - 200)):@$ptlen"
rc=0
"$TK" decode --no-disasm "$work/gap2.data" >"$work/gap2.txt" 2>"$work/gap2.err" || rc=$?
[ $rc = 0 ] && grep -q "gap2.data: snapshot mode: $((p1 - 200)) bytes before the first snapshot's first PSB left out" "$work/gap2.err" &&
	! grep -q 'do not overlap' "$work/gap2.err" ||
	{ echo "a first snapshot inside a packet: exit status $rc"; cat "$work/gap2.err"; exit 1; }
python3 "$SRC/tests/tools/ptsegments.py" "$work/truth.txt" "$work/gap2.txt" >"$work/seg.out" &&
	grep -q '^1 pieces' "$work/seg.out" || { echo "a first snapshot inside a packet: $(cat "$work/seg.out")"; exit 1; }

# snapshots exactly adjacent (each ring of 8192 bytes ends where the next begins, as their
# offsets say; the last, the ring at the trace's end, overlaps the one before, with or
# without a PSB in the overlap as the run falls): the whole trace, once. perf looks only
# for bytes in common (PSBs and their TSCs), finds none, and starts each snapshot over at
# its first PSB: it drops the bytes before it, which it has (lost instructions: the truth
# has them)
python3 "$SRC/tests/tools/mkperf.py" "$work/adj.data" --queue 0:4242:"$work/lj.pt" \
	--snapshot 8192:8192 "${modargs[@]}"
# (into a pipe; the exit status and the difference said: this failed once in CI with an
# empty stderr, and the pipeline it was could not tell a crash from other text)
{ "$TK" decode --no-disasm "$work/adj.data" 2>"$work/adj.err" || echo $? >"$work/adj.rc"; } |
	cat >"$work/adj.txt"
rc=$(cat "$work/adj.rc" 2>/dev/null || echo 0)
[ "$rc" = 0 ] && cmp -s <(grep -v '^\[' "$work/adj.txt") <(grep -v '^\[' "$work/truth.txt") ||
	{ echo "adjacent snapshots: not the whole trace once (exit status $rc, $(wc -l <"$work/adj.txt") lines)"
	  cat "$work/adj.err"; diff <(grep -v '^\[' "$work/adj.txt") <(grep -v '^\[' "$work/truth.txt") | head -10 || true
	  exit 1; }
np=$(perf script -i "$work/adj.data" --itrace=i0ns -F ip 2>/dev/null | wc -l)
[ "$np" -gt 0 ] && [ "$np" -lt "$n1" ] ||
	{ echo "adjacent snapshots: perf decoded $np of $n1 instructions (it used to lose some)"; exit 1; }

# a file cut inside a buffer: 100 bytes into the tenth buffer's data (perf names its record)
rec10=$(perf report -D -i "$work/one.data" 2>/dev/null |
	grep -o '0x[0-9a-f]* \[0x30\]: PERF_RECORD_AUXTRACE size' | sed -n 10p | cut -d' ' -f1)
[ -n "$rec10" ] || { echo "no tenth trace buffer"; exit 1; }
head -c $((rec10 + 48 + 100)) "$work/one.data" >"$work/cut.data"
rc=0
"$TK" decode --stat "$work/cut.data" >"$work/cut.txt" 2>"$work/cut.err" || rc=$?
[ $rc = 1 ] || { echo "cut file: exit status $rc, want 1"; cat "$work/cut.err"; exit 1; }
grep -q "cut.data: offset $(printf 0x%x "$rec10"): trace buffer of [0-9]* bytes runs past the end of the data" \
	"$work/cut.err" || { echo "cut file: no message"; cat "$work/cut.err"; exit 1; }
nc=$(awk '/^insn:/ {print $2}' "$work/cut.txt")
[ "$nc" -gt $((n1 / 3)) ] && [ "$nc" -lt "$n1" ] || { echo "cut file: $nc of $n1 instructions"; exit 1; }
# ... and they begin the whole file's instructions
tk_ips "$work/cut.data" 2>/dev/null >"$work/cut.tk" || true
[ "$(wc -l <"$work/cut.tk")" = "$nc" ] || { echo "cut file: --stat and the listing disagree"; exit 1; }
head -n "$nc" "$work/one.tk" | cmp -s - "$work/cut.tk" ||
	{ echo "cut file: not the start of the whole file's instructions"; exit 1; }
# the code mappings of a real `perf record` session, plain and compressed (-z, zstd):
# tracekit lists the executable file mappings perf report -D shows
for z in "" -z; do
	perf record $z -q -o "$work/rec$z.data" -- "$work/lj" >/dev/null 2>"$work/perf.err" ||
		{ echo "perf record $z failed"; cat "$work/perf.err"; exit 1; }
	perf report -D -i "$work/rec$z.data" 2>/dev/null | grep -E 'PERF_RECORD_MMAP2 .*: r-xp (/|\[vdso\])' |
		sed -E 's/.*\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+|0) .*r-xp (.*)$/\1 \2 \3 \4/' |
		while read -r addr len off path; do
			printf '0x%x-0x%x offset 0x%x %s\n' "$addr" $((addr + len)) "$off" "$path"
		done | sort >"$work/maps.perf"
	"$TK" info "$work/rec$z.data" | awk '$1 == "mmap:" { $1 = $2 = $3 = ""; sub(/^ +/, "");
		sub(/ build-id [0-9a-f]+$/, ""); print }' |
		sort >"$work/maps.tk"
	[ "$(wc -l <"$work/maps.perf")" -ge 2 ] || { echo "perf record $z: too few mappings"; exit 1; }
	cmp -s "$work/maps.perf" "$work/maps.tk" || { echo "perf record $z: mappings differ";
		diff "$work/maps.perf" "$work/maps.tk"; exit 1; }
done
grep -q '^# compressed : Zstd' <(perf report --header-only -i "$work/rec-z.data" 2>/dev/null) ||
	{ echo "perf record -z wrote no compressed records"; exit 1; }
# build-ids: tracekit info gives a session's files the ids perf buildid-list gives them
perf record --buildid-all -q -o "$work/bid.data" -- "$work/lj" >/dev/null 2>"$work/perf.err" ||
	{ echo "perf record --buildid-all failed"; cat "$work/perf.err"; exit 1; }
perf buildid-list -i "$work/bid.data" 2>/dev/null | awk '$2 ~ /^(\/|\[vdso\])/ {print $1, $2}' |
	sort >"$work/bid.perf"
"$TK" info "$work/bid.data" | awk '$1 == "mmap:" && $8 == "build-id" {print $9, $7}' | sort -u >"$work/bid.tk"
[ "$(wc -l <"$work/bid.tk")" -ge 2 ] && [ -z "$(comm -23 "$work/bid.tk" "$work/bid.perf")" ] ||
	{ echo "build-ids differ from perf buildid-list"; diff "$work/bid.perf" "$work/bid.tk"; exit 1; }
# ... and a file whose build-id is not the recorded one is left out, not decoded as if it ran
idargs=()
while read -r path bias id; do idargs+=(--module "$path:$bias:$id"); done < <("$TK" info "$work/lj.tkbt" |
	awk '$1 == "module" { for (i = 3; i < NF; i++) { if ($i == "bias") b = $(i + 1);
		if ($i == "build-id") d = $(i + 1) } print $2, b, d }')
python3 "$SRC/tests/tools/mkperf.py" "$work/ids.data" --packets "$work/lj.dump" "${idargs[@]}" \
	--queue 0:4242:"$work/lj.pt"
tk_ips "$work/ids.data" | cmp -s - "$work/one.tk" || { echo "build-ids that match: not decoded"; exit 1; }
# other code mapped over the program's (another process's executable, say): one image
# cannot hold both, which is said
for m in $mods; do case $m in "$work/lj:"*) ljbias=${m##*:} ;; esac; done
true_path=$(readlink -f /bin/true)
true_bias=$(python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import mkperf as m
print(hex(int(sys.argv[2], 0) + m.exec_segments(sys.argv[3])[0][0] - m.exec_segments(sys.argv[4])[0][0]))" \
	"$SRC/tests/tools" "$ljbias" "$work/lj" "$true_path")   # its code where the program's is
mk "$work/clash.data" --queue 0:4242:"$work/lj.pt" --module "$true_path:$true_bias"
"$TK" decode --stat "$work/clash.data" >/dev/null 2>"$work/clash.err" || true
grep -q "1 code mappings overlap others of different code, first $true_path (pid 4242) and $work/lj (pid 4242)" \
	"$work/clash.err" || { echo "overlapping mappings: no warning"; cat "$work/clash.err"; exit 1; }
grep -q "1 code mappings overlap" <("$TK" info "$work/clash.data" 2>&1 >/dev/null) ||
	{ echo "overlapping mappings: info does not say"; exit 1; }
grep -q overlap <("$TK" decode --stat "$work/one.data" 2>&1 >/dev/null) &&
	{ echo "mappings that do not overlap: a warning"; exit 1; }
cc -O2 -DOTHER_BUILD -o "$work/lj" "$SRC/tests/data/seams/lj.c"   # the same path, other code
rc=0
"$TK" decode --stat "$work/ids.data" >"$work/ids.txt" 2>"$work/ids.err" || rc=$?
grep -q "$work/lj is not the file the session mapped" "$work/ids.err" ||
	{ echo "rebuilt program: no warning"; cat "$work/ids.err"; exit 1; }
ni=$(awk '/^insn:/ {print $2}' "$work/ids.txt")
[ $rc = 1 ] && [ "$ni" -gt 0 ] && [ "$ni" -lt "$n1" ] ||
	{ echo "rebuilt program: exit $rc, $ni of $n1 instructions (want 1, libc's only)"; exit 1; }
# the vDSO: code a program runs in the kernel's page. Recorded on this kernel (the build-id
# perf buildid-list gives the session's [vdso]), its code is this machine's: a trace into
# __vdso_clock_gettime decodes its first block; under another build-id it is a gap
vid=$(perf buildid-list -i "$work/bid.data" 2>/dev/null | awk '$2 == "[vdso]" {print $1}')
[ -n "$vid" ] || { echo "the session recorded no vdso build-id"; exit 1; }
python3 - "$work/vdso.pt" <<'PY'
import re, struct, sys
# this kernel's vDSO, from this process, and the offset of __vdso_clock_gettime in it
m = re.search(r'([0-9a-f]+)-([0-9a-f]+) r-xp 00000000 00:00 0\s+\[vdso\]', open('/proc/self/maps').read())
with open('/proc/self/mem', 'rb') as f:
    f.seek(int(m.group(1), 16))
    img = f.read(int(m.group(2), 16) - int(m.group(1), 16))
shoff, = struct.unpack_from('<Q', img, 0x28)
shentsize, shnum = struct.unpack_from('<HH', img, 0x3a)
secs = [struct.unpack_from('<IIQQQQIIQQ', img, shoff + i * shentsize) for i in range(shnum)]
dynsym = next(s for s in secs if s[1] == 11)
strtab = secs[dynsym[6]]
for i in range(dynsym[5] // 24):
    name, _, _, _, value, _ = struct.unpack_from('<IBBHQQ', img, dynsym[4] + i * 24)
    if img[strtab[4] + name:].split(b'\0')[0] == b'__vdso_clock_gettime':
        entry = value
# PSB, PSBEND, MODE.Exec 64-bit, TIP.PGE to the entry (6 bytes), TIP.PGD (no IP)
ip = 0x7fff00000000 + entry
open(sys.argv[1], 'wb').write(bytes([2, 0x82] * 8 + [2, 0x23, 0x99, 0x01, 0x71]) +
                              struct.pack('<Q', ip)[:6] + bytes([0x01]))
PY
python3 "$SRC/tests/tools/mkperf.py" "$work/vdso.data" --queue 0:1:"$work/vdso.pt" --vdso 0x7fff00000000:"$vid"
"$TK" decode --no-disasm "$work/vdso.data" >"$work/vdso.txt" 2>"$work/vdso.err" ||
	{ echo "vdso: decode failed"; cat "$work/vdso.err" "$work/vdso.txt"; exit 1; }
[ "$(grep -c '^00007fff0000' "$work/vdso.txt")" -ge 2 ] || { echo "vdso: its code not decoded"; cat "$work/vdso.txt"; exit 1; }
python3 "$SRC/tests/tools/mkperf.py" "$work/vdso2.data" --queue 0:1:"$work/vdso.pt" \
	--vdso 0x7fff00000000:00112233445566778899aabbccddeeff00112233
rc=0
"$TK" decode --no-disasm "$work/vdso2.data" >"$work/vdso2.txt" 2>"$work/vdso2.err" || rc=$?
[ $rc = 1 ] && grep -q 'no code in the image at 00007fff0000' "$work/vdso2.txt" &&
	grep -q "is not this kernel's" "$work/vdso2.err" || { echo "vdso of another kernel: not a gap"; exit 1; }
# the kernel, moved by KASLR: a vmlinux-like ELF file linked at 0xffffffff81000000, and a
# trace of its code 0x2e400000 higher (a call, a compressed return, a return out of it)
cat >"$work/k.S" <<'ASM'
	.text
	.globl _text, k_entry, k_leaf
	.type k_entry, @function
	.type k_leaf, @function
_text:
k_entry:
	mov $1, %eax
	add %eax, %eax
	call k_leaf
	ret
k_leaf:
	nop
	ret
ASM
mkdir "$work/kern"
cc -nostdlib -static -no-pie -Wl,-z,noseparate-code -Wl,-Ttext-segment=0xffffffff81000000 \
	-Wl,--build-id -Wl,-e,k_entry -o "$work/kern/vmlinux" "$work/k.S"
ktext=$(nm "$work/kern/vmlinux" | awk '$3 == "_text" {print "0x" $1}')
krun=$(printf '0x%x' $((ktext + 0x2e400000)))
kid=$(readelf -n "$work/kern/vmlinux" | awk '/Build ID/ {print $3}')
python3 - "$work/k.pt" "$krun" <<'PY'
import struct, sys
# PSB, PSBEND, MODE.Exec 64-bit, TIP.PGE (6 bytes), TNT: the return taken, TIP.PGD (no IP)
open(sys.argv[1], 'wb').write(bytes([2, 0x82] * 8 + [2, 0x23, 0x99, 0x01, 0x71]) +
                              struct.pack('<Q', int(sys.argv[2], 0))[:6] + bytes([0x06, 0x01]))
PY
python3 "$SRC/tests/tools/mkperf.py" "$work/k.data" --queue 0:1:"$work/k.pt" --kernel "$krun":"$kid"
python3 "$SRC/tests/tools/mkperf.py" "$work/k1.data" --queue 0:1:"$work/k.pt" --kernel "$krun"
python3 "$SRC/tests/tools/mkperf.py" "$work/k2.data" --queue 0:1:"$work/k.pt" \
	--kernel "$krun":00112233445566778899aabbccddeeff00112233
(cd "$work/kern" && PERF_BUILDID_DIR="$work/kern/.debug" perf script --itrace=i0ns -F ip \
	--vmlinux vmlinux -i "$work/k.data" 2>/dev/null) | awk '{print $1}' >"$work/k.perf"
[ "$(wc -l <"$work/k.perf")" = 6 ] || { echo "kernel: perf script gave"; cat "$work/k.perf"; exit 1; }
for d in k k1; do
	"$TK" decode --no-disasm --elf "$work/kern/vmlinux" "$work/$d.data" 2>"$work/$d.err" |
		grep -v '^\[' | sed 's/^0*//' >"$work/$d.tk" ||
		{ echo "kernel $d: decode failed"; cat "$work/$d.err"; exit 1; }
	cmp -s "$work/k.perf" "$work/$d.tk" ||
		{ echo "kernel $d: not perf's instructions"; diff "$work/k.perf" "$work/$d.tk"; exit 1; }
	grep -q "KASLR offset 0x2e400000" "$work/$d.err" && grep -q "1 kernel modules were mapped" "$work/$d.err" ||
		{ echo "kernel $d: no note"; cat "$work/$d.err"; exit 1; }
done
grep -q "kernel:   .*_text at $krun, traced, build-id $kid" <("$TK" info "$work/k.data") ||
	{ echo "kernel: info"; "$TK" info "$work/k.data"; exit 1; }
grep -q "modules:  1 kernel modules mapped" <("$TK" info "$work/k.data") ||
	{ echo "kernel: info of modules"; "$TK" info "$work/k.data"; exit 1; }
grep -q '^"k_leaf",1,' <("$TK" profile --to csv --elf "$work/kern/vmlinux" "$work/k.data" 2>/dev/null) ||
	{ echo "kernel: profile"; "$TK" profile --elf "$work/kern/vmlinux" "$work/k.data"; exit 1; }
grep -q -- "the code: --elf $work/kern/vmlinux:0xffffffffaf400000" \
	<("$TK" convert --to ipt -o "$work/k.out" --elf "$work/kern/vmlinux" "$work/k.data" 2>&1) ||
	{ echo "kernel: convert --to ipt does not name its place"; exit 1; }
rc=0
"$TK" decode --no-disasm --elf "$work/kern/vmlinux" "$work/k2.data" >"$work/k2.txt" 2>"$work/k2.err" || rc=$?
[ $rc = 1 ] && grep -q "no code in the image at ${krun#0x}" "$work/k2.txt" &&
	grep -q "is not the kernel the session ran" "$work/k2.err" ||
	{ echo "kernel of another build: not left out"; cat "$work/k2.err" "$work/k2.txt"; exit 1; }
grep -q "^${krun#0x}" <("$TK" decode --no-disasm --elf "$work/kern/vmlinux:0xffffffffaf400000" \
	"$work/k2.data" 2>/dev/null) || { echo "kernel placed by hand: not taken"; exit 1; }
# perf record --kcore: a directory, DIR/data the records, DIR/kcore_dir the kernel's code as it
# ran (kcore: an ELF core file at run-time addresses, here with the first instruction's
# immediate patched, as boot-time patching makes them differ from vmlinux) and its kallsyms
mkdir -p "$work/k.dir/kcore_dir"
cp "$work/k.data" "$work/k.dir/data"
printf 'tk_test 16384 0 - Live 0x%x\n' $((krun + (16 << 20))) >"$work/k.dir/kcore_dir/modules"
printf '%x T _text\n%x T k_entry\n%x t k_leaf\n0000000000000000 D hidden\n' "$krun" "$krun" \
	$(($(nm "$work/kern/vmlinux" | awk '$3 == "k_leaf" {print "0x" $1}') + 0x2e400000)) \
	>"$work/k.dir/kcore_dir/kallsyms"
python3 - "$work/kern/vmlinux" "$work/k.dir/kcore_dir/kcore" "$ktext" <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
phoff, = struct.unpack_from('<Q', d, 0x20)
_, _, off, vaddr, _, size, _, _ = struct.unpack_from('<IIQQQQQQ', d, phoff)   # its one PT_LOAD
seg = bytearray(d[off:off + size])
seg[int(sys.argv[3], 0) - vaddr + 1] = 2                  # mov $1, %eax -> mov $2, %eax
eh = b'\x7fELF' + bytes([2, 1, 1]) + bytes(9) + struct.pack('<HHIQQQIHHHHHH', 4, 62, 1, 0, 64, 0, 0,
                                                             64, 56, 1, 64, 0, 0)
ph = struct.pack('<IIQQQQQQ', 1, 5, 0x1000, vaddr + 0x2e400000, 0, size, size, 0x1000)
open(sys.argv[2], 'wb').write(eh + ph + bytes(0x1000 - 64 - 56) + bytes(seg))
PY
(cd "$work/kern" && PERF_BUILDID_DIR="$work/kern/.debug" perf script --itrace=i0ns -F ip,insn \
	-i "$work/k.dir" 2>/dev/null) >"$work/kdir.perf"
grep -q "^ *${krun#0x} insn: b8 02 00 00 00" "$work/kdir.perf" ||
	{ echo "kcore: perf script gave"; cat "$work/kdir.perf"; exit 1; }
"$TK" decode "$work/k.dir" >"$work/kdir.txt" 2>"$work/kdir.err" ||
	{ echo "kcore: decode failed"; cat "$work/kdir.err"; exit 1; }
grep -v '^\[' "$work/kdir.txt" | awk '{print $1}' | sed 's/^0*//' | cmp -s - "$work/k.perf" &&
	grep -q "^0*${krun#0x}  mov eax, 0x02" "$work/kdir.txt" && [ ! -s "$work/kdir.err" ] ||
	{ echo "kcore: not the code as it ran"; cat "$work/kdir.err" "$work/kdir.txt"; exit 1; }
# a corrupt third line is named and skipped, the names after it still read
sed -i '3i ffffffffzz not-a-line' "$work/k.dir/kcore_dir/kallsyms"
grep -q '^"k_leaf",1,' <("$TK" profile --to csv "$work/k.dir" 2>"$work/kprof.err") &&
	grep -q 'kallsyms: line 3: not a kallsyms line' "$work/kprof.err" ||
	{ echo "kcore: kallsyms names"; cat "$work/kprof.err"; "$TK" profile "$work/k.dir"; exit 1; }
# with a vmlinux as well: its symbols serve, the code is still kcore's
grep -q "^0*${krun#0x}  mov eax, 0x02" <("$TK" decode --elf "$work/kern/vmlinux" "$work/k.dir" 2>/dev/null) ||
	{ echo "kcore and vmlinux: vmlinux's code won"; exit 1; }
rc=0
"$TK" decode --no-disasm "$work/k.data" >/dev/null 2>"$work/k3.err" || rc=$?
[ $rc = 1 ] && grep -q "the session traced the kernel too" "$work/k3.err" ||
	{ echo "kernel traced, no vmlinux: no warning"; cat "$work/k3.err"; exit 1; }
# a hostile snapshot file: the newer snapshot begins like the end of the older one for
# 32 KB and then differs, so each of the older one's 1,000 later PSBs would be compared
# over 32 KB (quadratic in the size); the search gives up and reads it as not overlapping
python3 - "$work/hostile.data" <<'PY'
import os, struct, sys
sys.path.insert(0, os.environ['SRC'] + '/tests/tools')
import mkperf as m
unit = bytes([2, 0x82] * 8) + bytes([2, 0x23]) + bytes(14)    # PSB, PSBEND, PADs
bufs = [unit * 2000, unit * 1000 + b'\x55' * 64000]
priv = [m.PMU_TYPE, 0, 0, 0, 0, 1 << 10, 1 << 11, 0, 1, 1, 1 << 9, 0xf << 14, 2, 1, 2, 24, 0]
data = m.rec(m.REC_AUXTRACE_INFO, 0, struct.pack('<II', 1, 0) + struct.pack('<17Q', *priv))
for k, b in enumerate(bufs):
    data += m.rec(m.REC_AUXTRACE, 0, struct.pack('<QQQIIII', len(b), 1000 * k, 0, 0, 1, 0, 0)[:40]) + b
attr = struct.pack('<IIQQQQQ', m.PMU_TYPE, m.ATTR_SIZE, m.CONFIG, 1, m.SAMPLE_TYPE, 0, 0)
attr += bytes(m.ATTR_SIZE - len(attr))
ids = 104 + m.ATTR_SIZE + 16
hdr = b'PERFILE2' + struct.pack('<8Q', 104, m.ATTR_SIZE + 16, 104, m.ATTR_SIZE + 16, ids + 8,
                                len(data), 0, 0) + bytes(32)
open(sys.argv[1], 'wb').write(hdr + attr + struct.pack('<QQQ', ids, 8, 1) + data)
PY
grep -q '1 snapshots not overlapping the one before' <("$TK" info "$work/hostile.data") ||
	{ echo "hostile snapshots: the overlap search did not give up"; "$TK" info "$work/hostile.data"; exit 1; }
echo "ipt perf.data: ok ($n1 instructions, $nbuf buffers, the same as perf script)"
