# Sourced by tests: tests/data/seams/lj.c (setjmp/longjmp between calls) recorded as a
# branch trace in $work/lj.tkbt, converted to $work/lj.pt, its load bias in $bias, and
# $work/two.data, a perf.data with the stream in two queues.
cc -O1 -o "$work/lj" "$SRC/tests/data/seams/lj.c"
"$TK" record --btrace -o "$work/lj.tkbt" -- "$work/lj" >/dev/null 2>"$work/rec.err" ||
	{ echo "record failed"; cat "$work/rec.err"; exit 1; }
"$TK" convert --to ipt -q -o "$work/lj.pt" "$work/lj.tkbt"
bias=$("$TK" info "$work/lj.tkbt" | awk -v m="$work/lj" '$1 == "module" && $2 == m {
	for (i = 3; i < NF; i++) if ($i == "bias") print $(i + 1) }')
[ -n "$bias" ] || { echo "no load bias for $work/lj"; exit 1; }
python3 "$SRC/tests/tools/mkperf.py" "$work/two.data" --queue 0:1:"$work/lj.pt" \
	--queue 3:1:"$work/lj.pt" --module "$work/lj:$bias"
