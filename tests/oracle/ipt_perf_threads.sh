#!/usr/bin/env bash
# Intel PT in perf.data of several processes and threads (issue #30), against perf's own
# decoder on the same files. Two programs built without PIE (lj.c at -O1 and -O2: other
# code at the same addresses) are recorded and converted to PT; tests/tools/mkperf.py
# --session makes a timed session of them: process 100 (lj) with threads 100 and 101,
# process 200 forked from it and exec'ing lj2, the three threads' traces cut at PSBs and
# run in turn on CPU 0 with PERF_RECORD_SWITCH_CPU_WIDE records between them; and the same
# with a queue per thread (perf record --per-thread).
# - per thread, `perf script --itrace=i0ns -F pid,tid,cpu,ip` and `tracekit decode
#   --no-disasm` (its streams named by cpu, pid and tid) list the same instructions: each
#   thread decoded against its own process's code (one image for all cannot hold both
#   programs' code)
# - info lists the processes (name, parent, execs, threads) and no overlap (each process
#   has its own image)
# - `-j 2` with small chunks decodes and profiles as `-j 1` does
# - per thread, perf's call and return branches (--itrace=cr) are tracekit's call and ret
#   instructions
# - a buffer lost (its AUX record flagged truncated, the trace up to the next PSB gone):
#   perf's instructions still, the gap in the stream of the thread perf names for the
#   lost data, exit status 1
# - stats: perf's instructions, each process's over its own code; its thread filters; the
#   processes' counts and footprints add up; shards merge to it
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v perf >/dev/null || { echo "perf missing: scripts/install-deps.sh installs linux-perf"; exit 1; }
libc=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
# TK_BTRACE_CALL_TIMES=0: TSCs only where tracing resumes, as in ipt_perf.sh (perf script
# and tracekit place a TSC between the last TNT and a TIP differently)
for p in lj:-O1 lj2:-O2; do
	n=${p%%:*}
	cc "${p#*:}" -no-pie -o "$work/$n" "$SRC/tests/data/seams/lj.c"
	TK_BTRACE_CALL_TIMES=0 "$TK" record --btrace -o "$work/$n.tkbt" --module main --module "$libc" -- "$work/$n" \
		>/dev/null 2>"$work/rec.err" || { echo "record $n failed"; cat "$work/rec.err"; exit 1; }
	"$TK" convert --to ipt -q -o "$work/$n.pt" "$work/$n.tkbt"
	"$TK" dump "$work/$n.pt" >"$work/$n.dump"
	# its modules as JSON strings "PATH:BIAS"
	"$TK" info "$work/$n.tkbt" | awk '$1 == "module" { for (i = 3; i < NF; i++)
		if ($i == "bias") printf "%s\"%s:%s\"", n++ ? ", " : "", $2, $(i + 1) }' >"$work/$n.mods"
done
cat >"$work/spec.json" <<EOF
{"cpu": 0, "slices": 3,
 "procs": [{"pid": 100, "comm": "lj", "modules": [$(cat "$work/lj.mods")]},
           {"pid": 200, "parent": 100, "comm": "lj2", "modules": [$(cat "$work/lj2.mods")]}],
 "threads": [{"pid": 100, "tid": 100, "pt": "$work/lj.pt", "packets": "$work/lj.dump"},
             {"pid": 100, "tid": 101, "pt": "$work/lj.pt", "packets": "$work/lj.dump"},
             {"pid": 200, "tid": 200, "pt": "$work/lj2.pt", "packets": "$work/lj2.dump"}]}
EOF
mk() { python3 "$SRC/tests/tools/mkperf.py" "$@" --session "$work/spec.json"; }
mk "$work/cpu.data"
mk "$work/thr.data" --per-thread
mk "$work/lost.data" --lose 20

# "pid tid cpu ip" of each instruction (per-thread queues: "- tid ip"), thread by thread
perf_ips() {
	perf script -i "$1" --itrace=i0ns -F pid,tid,${2:+cpu,}ip 2>"$work/perf.err" | awk -v cpu="${2:-}" '{
		split($1, t, "/"); a = $NF
		if (cpu) { c = $2; gsub(/[][]/, "", c); print t[1], t[2], c + 0, a } else print "-", t[2], a }' |
		sort -s -n -k2,2
}
tk_ips() {
	"$TK" decode --no-disasm "$@" | awk '
		/^\[.*\[cpu [0-9]+, pid [0-9]+, tid [0-9]+\]: [0-9]+ bytes of trace\]$/ {
			match($0, /cpu [0-9]+, pid [0-9]+, tid [0-9]+\]/)
			split(substr($0, RSTART, RLENGTH - 1), w, /[ ,]+/); who = w[4] " " w[6] " " w[2]; next }
		/^\[.*\[thread [0-9]+\]: [0-9]+ bytes of trace\]$/ { match($0, /thread [0-9]+/)
			who = "- " substr($0, RSTART + 7, RLENGTH - 7); next }
		/^\[/ { next }
		{ a = $1; sub(/^0+/, "", a); print who, a }' | sort -s -n -k2,2
}
perf_ips "$work/cpu.data" cpu >"$work/cpu.perf"
tk_ips "$work/cpu.data" >"$work/cpu.tk" || { echo "per CPU: decode failed"; exit 1; }
[ "$(cut -d' ' -f1,2 "$work/cpu.perf" | uniq -c | awk '$1 > 100000' | wc -l)" = 3 ] ||
	{ echo "perf did not decode three threads"; cut -d' ' -f1,2 "$work/cpu.perf" | uniq -c; cat "$work/perf.err"; exit 1; }
cmp -s "$work/cpu.perf" "$work/cpu.tk" || { echo "per CPU: tracekit and perf differ" \
	"($(wc -l <"$work/cpu.tk") and $(wc -l <"$work/cpu.perf") instructions)"
	diff "$work/cpu.perf" "$work/cpu.tk" | head -10 || true; exit 1; }
# the three threads are not the same run: 200's is the other program's
[ "$(grep -c '^200 200 ' "$work/cpu.tk")" != "$(grep -c '^100 100 ' "$work/cpu.tk")" ] ||
	{ echo "thread 200 ran lj, not lj2"; exit 1; }
"$TK" decode --no-disasm "$work/cpu.data" 2>"$work/cpu.err" >/dev/null ||
	{ echo "per CPU: decode failed"; cat "$work/cpu.err"; exit 1; }
! grep -q overlap "$work/cpu.err" || { echo "per-process images: still an overlap warning"; cat "$work/cpu.err"; exit 1; }
# stats reads the session by thread too: each process's trace over its own code (perf's
# instructions, no gap, no overlap); --pid/--tid take its threads; the processes' counts
# and footprints add up to the session's; shards merge to it
total() { awk '$1 == "total" { print $2 }' "$1"; }
field() { awk -v f="$2" 'index($0, "  " f " ") == 1 { print $NF }' "$1"; }
"$TK" stats "$work/cpu.data" >"$work/st.txt" 2>"$work/st.err" ||
	{ echo "stats: exit $?"; cat "$work/st.err"; exit 1; }
[ "$(total "$work/st.txt")" = "$(wc -l <"$work/cpu.perf")" ] && [ ! -s "$work/st.err" ] &&
	[ "$(head -n 1 "$work/st.txt")" = "$work/cpu.data: Intel PT, 3 threads" ] ||
	{ echo "stats: $(total "$work/st.txt") instructions, perf $(wc -l <"$work/cpu.perf")"; cat "$work/st.err"; exit 1; }
# (the same but for the disables where a CPU's trace switched threads)
nodis() { tail -n +2 | grep -v -e '^  tracing disabled ' -e '^  asynchronous disables '; }
"$TK" stats "$work/thr.data" 2>/dev/null | nodis | cmp -s <(nodis <"$work/st.txt") - ||
	{ echo "stats: per-thread queues differ from per-CPU"; exit 1; }
for f in "--pid 100:^100 " "--pid 200:^200 " "--tid 101:^100 101 " "--comm lj2:^200 "; do
	want=$(grep -c "${f#*:}" "$work/cpu.perf") f=${f%%:*}
	# shellcheck disable=SC2086
	"$TK" stats $f "$work/cpu.data" >"$work/st-${f##* }.txt"
	[ "$(total "$work/st-${f##* }.txt")" = "$want" ] ||
		{ echo "stats $f: $(total "$work/st-${f##* }.txt") instructions, perf $want"; exit 1; }
done
for k in "distinct instructions" "code lines (64 bytes)" "blocks executed" "direct calls"; do
	[ $(( $(field "$work/st-100.txt" "$k") + $(field "$work/st-200.txt" "$k") )) = "$(field "$work/st.txt" "$k")" ] ||
		{ echo "stats: the processes' $k do not add up to the session's"; exit 1; }
done
for i in 1 2 3; do "$TK" stats --shard $i/3 -o "$work/sh-$i.tkp" "$work/cpu.data" 2>/dev/null; done
"$TK" merge "$work"/sh-*.tkp 2>/dev/null | cmp -s - "$work/st.txt" ||
	{ echo "stats: 3 shards merged differ"; exit 1; }
perf_ips "$work/thr.data" >"$work/thr.perf"
tk_ips "$work/thr.data" >"$work/thr.tk" || { echo "per thread: decode failed"; exit 1; }
cmp -s "$work/thr.perf" "$work/thr.tk" || { echo "per thread: tracekit and perf differ"
	diff "$work/thr.perf" "$work/thr.tk" | head -10 || true; exit 1; }
[ "$(cut -d' ' -f2 "$work/thr.tk" | sort -u | tr '\n' ' ')" = "100 101 200 " ] ||
	{ echo "per thread: want threads 100, 101 and 200"; exit 1; }
"$TK" info "$work/cpu.data" >"$work/info.txt" 2>"$work/info.err"
grep -qx '  process:  pid 100 lj, 1 exec, threads 100 101' "$work/info.txt" &&
	grep -qx '  process:  pid 200 lj2, forked from 100, 1 exec, threads 200' "$work/info.txt" &&
	grep -q '^  switches: 10 ' "$work/info.txt" && [ ! -s "$work/info.err" ] ||
	{ echo "info: processes"; cat "$work/info.txt" "$work/info.err"; exit 1; }
# info --pid, --tid, --comm: the processes, threads and mappings of the selection only
for f in "--pid 200:pid 200 lj2, forked from 100, 1 exec, threads 200" \
	 "--tid 101:pid 100 lj, 1 exec, threads 101" "--comm lj2:pid 200 lj2, forked from 100, 1 exec, threads 200" \
	 "--pid 100 --tid 200:"; do
	want=${f#*:}; f=${f%%:*}
	# shellcheck disable=SC2086
	"$TK" info $f "$work/cpu.data" >"$work/if.txt"
	[ "$(grep '^  process:' "$work/if.txt")" = "${want:+  process:  $want}" ] &&
		[ "$(awk '$1 == "mmap:" { print $3 }' "$work/if.txt" | sort -u)" = "$(cut -d' ' -f2 <<<"$want")" ] ||
		{ echo "info $f: not the processes of the selection"; cat "$work/if.txt"; exit 1; }
done
for bad in "$SRC/tests/data/xray/basic-v1.xray" "$work/lj.pt"; do
	rc=0; "$TK" info --pid 1 "$bad" >/dev/null 2>&1 || rc=$?
	[ $rc = 2 ] || { echo "info --pid of $bad: exit $rc, want 2"; exit 1; }
done

# -j 2, small chunks: each chunk decoded against its thread's process, as -j 1 does
TK_IPT_CHUNK=4096 "$TK" decode --no-disasm -j 2 "$work/cpu.data" >"$work/j2.txt" 2>/dev/null
"$TK" decode --no-disasm -j 1 "$work/cpu.data" 2>/dev/null | cmp -s - "$work/j2.txt" ||
	{ echo "decode -j 2 differs from -j 1"; exit 1; }
"$TK" profile --threads --to csv -j 1 "$work/cpu.data" >"$work/p1.csv" 2>/dev/null
TK_IPT_CHUNK=4096 "$TK" profile --threads --to csv -j 2 "$work/cpu.data" 2>/dev/null | cmp -s - "$work/p1.csv" ||
	{ echo "profile -j 2 differs from -j 1"; exit 1; }
[ "$(awk -F, 'NR > 1 {print $1}' "$work/p1.csv" | sort -un | tr '\n' ' ')" = "100 101 200 " ] ||
	{ echo "profile --threads: want rows of threads 100, 101 and 200"; head -3 "$work/p1.csv"; exit 1; }
# rows by pid, tid and comm; each thread's functions named from its own program's symbols
# (lj and lj2 have other functions at the same addresses): nm's name at each row's address,
# never a row at another program's function entry (each thread's process has its own
# entries: a jump there inside its own function is no tail call), nor its name
[ "$(awk -F, 'NR == 1 { print $1, $(NF - 1), $NF } NR > 1 { print $1, $(NF - 1), $NF | "sort -u" }' \
	"$work/p1.csv" | tr '\n' ';')" = 'thread pid comm;100 100 "lj";101 100 "lj";200 200 "lj2";' ] ||
	{ echo "profile --threads --to csv: want pid and comm of each thread"; head -3 "$work/p1.csv"; exit 1; }
"$TK" profile --threads --to json "$work/cpu.data" 2>/dev/null | sed -n \
	's/^{"name":"\([^"]*\)","address":"0x\(40[0-9a-f]*\)","thread":\([0-9]*\),"pid":\([0-9]*\),"comm":"\([^"]*\)".*/\3 \5 \2 \1/p' |
	grep -v '@plt$' | sort >"$work/names.tk"
for n in lj lj2; do nm "$work/$n" | awk -v n=$n '$2 ~ /^[tT]$/ { sub(/^0+/, "", $1); print n, $1, $3 }'; done >"$work/names.nm"
awk 'NR == FNR { want[$1 " " $2] = $3; next } { w = want[$2 " " $3]
	if (w != $4) { print; bad++ } n[$1]++ }
	END { exit bad || n[100] < 3 || n[101] < 3 || n[200] < 3 }' "$work/names.nm" "$work/names.tk" ||
	{ echo "profile --threads: functions not named from their process's program"; cat "$work/names.tk"; exit 1; }
# without --threads: each process's functions added over its threads, lj's and lj2's at
# one address apart, each with its own program's name (not one row named by one of them)
"$TK" profile --to csv "$work/cpu.data" 2>/dev/null | awk -F, 'NR > 1 { print $1, $2, $6 }' |
	sort >"$work/merged.tk"
awk -F, 'NR > 1 { k = $(NF - 1) SUBSEP $2; c[k] += $3; x[k] += $7 }
	END { for (k in c) { split(k, w, SUBSEP); print w[2], c[k], x[k] } }' "$work/p1.csv" |
	sort | cmp -s - "$work/merged.tk" ||
	{ echo "profile: rows not each process's functions added over its threads"
	  diff <(awk -F, 'NR > 1 { k = $(NF - 1) SUBSEP $2; c[k] += $3; x[k] += $7 }
		END { for (k in c) { split(k, w, SUBSEP); print w[2], c[k], x[k] } }' "$work/p1.csv" | sort) \
		"$work/merged.tk" | head; exit 1; }
grep -q '^"deep" 2400 ' "$work/merged.tk" || { echo "profile: no row of lj2's deep"; exit 1; }
# diff: each process's functions named from its own program too, rows of one name added
# (lj's and lj2's deep one row): profile's rows added by name; its stacks, profile's
"$TK" profile --to csv "$work/cpu.data" 2>/dev/null | awk -F, 'NR > 1 { c[$1] += $2; x[$1] += $6 }
	END { for (k in c) print k, c[k], x[k] }' | sort >"$work/byname.tk"
"$TK" diff --to csv "$work/cpu.data" "$work/cpu.data" 2>/dev/null | awk -F, 'NR > 1 { print $1, $2, $18 }' |
	sort | cmp -s - "$work/byname.tk" ||
	{ echo "diff: rows not the processes' functions added by name"
	  "$TK" diff --to csv "$work/cpu.data" "$work/cpu.data" 2>/dev/null | awk -F, 'NR > 1 { print $1, $2, $18 }' |
		sort | diff - "$work/byname.tk" | head; exit 1; }
grep -q '^"deep" 33600 ' "$work/byname.tk" || { echo "diff: deep not lj's and lj2's"; exit 1; }
"$TK" profile --to folded "$work/cpu.data" 2>/dev/null | awk '{ n = $NF; $NF = ""; v[$0] += n }
	END { for (k in v) print k v[k] }' | sort >"$work/folded.tk"
"$TK" diff --to folded "$work/cpu.data" "$work/cpu.data" 2>/dev/null | awk '{ $NF = ""; print }' |
	sed 's/ $//' | sort | cmp -s - "$work/folded.tk" ||
	{ echo "diff --to folded: stacks not the processes' stacks added"; exit 1; }

# --pid, --tid, --comm: only those threads decoded; their rows and instructions are the
# unfiltered run's of those threads, at -j 1 and -j 2 alike
for f in "--pid 100:100 101" "--pid 200,100:100 101 200" "--tid 101:101" "--comm lj2:200" \
	 "--pid 100 --tid 200:" "--comm nosuch:"; do
	want=${f#*:}; f=${f%%:*}
	# shellcheck disable=SC2086
	"$TK" profile --threads --to csv -j 1 $f "$work/cpu.data" >"$work/pf.csv" 2>/dev/null
	# shellcheck disable=SC2086
	TK_IPT_CHUNK=4096 "$TK" profile --threads --to csv -j 2 $f "$work/cpu.data" 2>/dev/null |
		cmp -s - "$work/pf.csv" || { echo "profile $f: -j 2 differs from -j 1"; exit 1; }
	awk -F, -v w=" $want " 'NR > 1 && index(w, " " $1 " ")' "$work/p1.csv" |
		cmp -s - <(tail -n +2 "$work/pf.csv") ||
		{ echo "profile $f: not the rows of threads '$want'"; diff "$work/p1.csv" "$work/pf.csv" | head -5; exit 1; }
	# shellcheck disable=SC2086
	tk_ips $f "$work/cpu.data" 2>/dev/null | awk -v w=" $want " 'index(w, " " $2 " ")' >"$work/f.tk"
	awk -v w=" $want " 'index(w, " " $2 " ")' "$work/cpu.tk" | cmp -s - "$work/f.tk" ||
		{ echo "decode $f: not the instructions of threads '$want'"; exit 1; }
done
# the session's rows are those of each process profiled alone, together
for p in 100 200; do "$TK" profile --threads --to csv --pid $p "$work/cpu.data" 2>/dev/null | tail -n +2; done |
	sort | cmp -s - <(tail -n +2 "$work/p1.csv" | sort) ||
	{ echo "profile --threads: not the rows of each process alone"; exit 1; }
rc=0; "$TK" profile --pid 1 "$SRC/tests/data/xray/basic-v1.xray" >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || { echo "profile --pid of an XRay log: exit $rc, want 2"; exit 1; }
rc=0; "$TK" decode --no-disasm --tid 100 "$work/lj.pt" >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || { echo "decode --tid of a raw PT stream: exit $rc, want 2"; exit 1; }

# timelines: a track per thread under its process (Chrome: process_name and thread_name
# with their pids, each slice on its thread's pid; Perfetto: process descriptors and thread
# descriptors with pid, tid and the process's track as parent), read back with protoc
"$TK" convert --to chrome -o "$work/tl.json" "$work/cpu.data" 2>/dev/null
python3 - "$work/tl.json" <<'PY' || { echo "chrome timeline: not grouped by process"; exit 1; }
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name" and e["pid"] != 1}
threads = {(e["pid"], e["tid"]) for e in ev if e.get("name") == "thread_name"}
slices = {(e["pid"], e["tid"]) for e in ev if e.get("ph") in ("B", "E")}
assert procs == {100: "lj", 200: "lj2"}, procs
assert threads == slices == {(100, 100), (100, 101), (200, 200)}, (threads, slices)
PY
"$TK" convert --to perfetto -o "$work/tl.pftrace" "$work/cpu.data" 2>/dev/null
protoc --decode=perfetto.Trace -I "$SRC/tests/tools" "$SRC/tests/tools/perfetto_trace.proto" \
	<"$work/tl.pftrace" | awk '/^ *uuid:/ { u = $2 } /^ *process {/ { p = 1 } /^ *thread {/ { t = 1 }
	/^ *pid:/ { pid = $2 } /^ *tid:/ { tid = $2 } /^ *process_name:/ { name[u] = $2; ppid[u] = pid }
	/^ *parent_uuid:/ && t { print "thread", pid, tid, "under", ppid[$2], name[$2] }
	/^ *track_descriptor {/ { p = t = 0 }' | sort >"$work/tl.pf"
printf '%s\n' 'thread 100 100 under 100 "lj"' 'thread 100 101 under 100 "lj"' \
	'thread 200 200 under 200 "lj2"' | cmp -s - "$work/tl.pf" ||
	{ echo "perfetto timeline: not grouped by process"; cat "$work/tl.pf"; exit 1; }

# calls and returns per thread: perf's branch samples (flags "call", "tr end call", ...;
# not syscalls) and tracekit's call and ret instructions
perf script -i "$work/cpu.data" --itrace=cr -F tid,flags 2>/dev/null | awk '{ t = $1; $1 = ""
	if ($0 ~ / call( |$)/) c[t]++; if ($0 ~ / return( |$)/) r[t]++ }
	END { for (t in c) print t, c[t], r[t] }' | sort >"$work/calls.perf"
"$TK" decode "$work/cpu.data" 2>/dev/null | awk '/^\[.*\[cpu [0-9]+, pid [0-9]+, tid [0-9]+\]: / {
		match($0, /tid [0-9]+/); t = substr($0, RSTART + 4, RLENGTH - 4); next }
	/^\[/ { next } $2 == "call" { c[t]++ } $2 == "ret" { r[t]++ }
	END { for (t in c) print t, c[t], r[t] }' | sort >"$work/calls.tk"
[ "$(wc -l <"$work/calls.perf")" = 3 ] && cmp -s "$work/calls.perf" "$work/calls.tk" ||
	{ echo "calls and returns per thread differ"; diff "$work/calls.perf" "$work/calls.tk"; exit 1; }

# a lost buffer: perf's instructions, the gap in the thread perf names, exit status 1
perf_ips "$work/lost.data" cpu >"$work/lost.perf"
tk_ips "$work/lost.data" 2>/dev/null >"$work/lost.tk" || true
cmp -s "$work/lost.perf" "$work/lost.tk" && ! cmp -s "$work/lost.tk" "$work/cpu.tk" ||
	{ echo "lost buffer: tracekit and perf differ"; diff "$work/lost.perf" "$work/lost.tk" | head; exit 1; }
who=$(perf script -i "$work/lost.data" --itrace=e 2>/dev/null | awk '/Lost trace data/ {
	for (i = 1; i < NF; i++) if ($i == "tid") print $(i + 1) }')
rc=0
"$TK" decode --no-disasm "$work/lost.data" >"$work/lost.txt" 2>"$work/lost.err" || rc=$?
gap=$(awk '/^\[.*tid [0-9]+\]: [0-9]+ bytes of trace\]$/ { match($0, /tid [0-9]+/);
	t = substr($0, RSTART + 4, RLENGTH - 4) } /^\[overflow/ { print t }' "$work/lost.txt")
[ $rc = 1 ] && [ -n "$who" ] && [ "$gap" = "$who" ] && grep -q "tid $who\]: 1 gap" "$work/lost.err" ||
	{ echo "lost buffer: exit $rc, gap in thread '$gap', perf says '$who'"; cat "$work/lost.err"; exit 1; }
echo "ipt perf.data threads: ok ($(wc -l <"$work/cpu.tk") instructions of 3 threads in 2 processes, as perf script)"
