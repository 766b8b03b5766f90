#!/usr/bin/env bash
# Return compression where a traced function is called from untraced code and returns out
# of the trace (issue #30): a program without PIE, lazily bound, calls strcmp through its
# PLT; the first call leaves the trace into ld.so (untraced), whose lazy binder runs
# strcmp's IFUNC resolver in libc (traced) and returns from it out of the trace, then
# jumps to the strcmp it chose. The processor pops its return stack at every near return,
# the resolver's too (SDM vol. 3C 36.2.1.2: a return is compressed only to the call of
# matching stack depth), so strcmp's return to the caller is no TNT bit but a TIP; perf's
# decoder pops at every return as well.
# - the recording ran the resolver traced (the case is there)
# - `perf script --itrace=i0ns` and `tracekit decode --no-disasm` of the converted trace in
#   perf.data list the same instructions, and both are the recording's own (the container
#   decoded: independent ground truth). Before the fix, strcmp's return was compressed and
#   perf went on at qsort's return site, two instructions short.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v perf >/dev/null || { echo "perf missing: scripts/install-deps.sh installs linux-perf"; exit 1; }
cat >"$work/ifunc.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_key(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
	char *v[] = { "pear", "fig", "apple", "kiwi", "plum", "lime" };

	qsort(v, 6, sizeof *v, by_key);
	printf("%s %s\n", v[0], v[5]);
	return 0;
}
EOF
cc -O1 -no-pie -Wl,-z,lazy -o "$work/ifunc" "$work/ifunc.c"
libc=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
TK_BTRACE_CALL_TIMES=0 "$TK" record --btrace -o "$work/ifunc.tkbt" --module main --module "$libc" -- "$work/ifunc" \
	>/dev/null 2>"$work/rec.err" || { echo "record failed"; cat "$work/rec.err"; exit 1; }
"$TK" convert --to ipt -q -o "$work/ifunc.pt" "$work/ifunc.tkbt"
"$TK" info "$work/ifunc.tkbt" >"$work/info.txt"
mods=() bias=
while read -r path b; do
	mods+=(--module "$path:$b")
	[ "$path" = "$libc" ] && bias=$b
done < <(awk '$1 == "module" { for (i = 3; i < NF; i++) if ($i == "bias") print $2, $(i + 1) }' "$work/info.txt")
[ ${#mods[@]} = 4 ] && [ -n "$bias" ] || { echo "want the program's and libc's modules"; cat "$work/info.txt"; exit 1; }

# the recording's own instructions (from the container, not from the converted trace)
"$TK" decode --no-disasm "$work/ifunc.tkbt" | awk '!/^\[/ { a = $1; sub(/^0+/, "", a); print a }' >"$work/ref"
resolver=$(nm -D "$libc" | awk '$2 == "i" && $3 ~ /^strcmp@@/ { print $1 }')
[ -n "$resolver" ] || { echo "libc has no IFUNC strcmp"; exit 1; }
printf '%x\n' $((0x$resolver + bias)) | grep -qxFf - "$work/ref" ||
	{ echo "strcmp's IFUNC resolver did not run traced: the case is not there"; exit 1; }

"$TK" dump "$work/ifunc.pt" >"$work/ifunc.dump"
python3 "$SRC/tests/tools/mkperf.py" "$work/ifunc.data" --queue 0:4242:"$work/ifunc.pt" \
	--packets "$work/ifunc.dump" "${mods[@]}"
perf script -i "$work/ifunc.data" --itrace=i0ns -F ip 2>"$work/perf.err" | awk '{ print $NF }' >"$work/perf"
"$TK" decode --no-disasm "$work/ifunc.data" | awk '!/^\[/ { a = $1; sub(/^0+/, "", a); print a }' >"$work/tk"
[ "$(wc -l <"$work/ref")" -gt 1000 ] || { echo "recording too short"; exit 1; }
cmp -s "$work/ref" "$work/tk" || { echo "tracekit is not the recording ($(wc -l <"$work/tk") and" \
	"$(wc -l <"$work/ref") instructions)"; diff "$work/ref" "$work/tk" | head; exit 1; }
cmp -s "$work/ref" "$work/perf" || { echo "perf is not the recording ($(wc -l <"$work/perf") and" \
	"$(wc -l <"$work/ref") instructions)"; diff "$work/ref" "$work/perf" | head; cat "$work/perf.err"; exit 1; }
echo "ipt return out of the trace: ok ($(wc -l <"$work/ref") instructions, perf, tracekit and the recording)"
