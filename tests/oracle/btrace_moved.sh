#!/usr/bin/env bash
# A branch trace whose executable moved or was rebuilt: the code of a recorded module is
# read from its recorded path only if that file has the recorded build-id, else from an
# --elf FILE or --module-path DIR/NAME that has it; with none, the module is named, its
# trace decodes as gaps, and the status is 1 (not 3, nothing decoded). A rebuilt file at
# the recorded path is not used: its code would decode into instructions that never ran.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/prog.c" <<'C'
#include <stdio.h>
__attribute__((noinline)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i % 3 ? i : -i;
	return s;
}
int main(void)
{
	printf("%ld\n", work(1000) + VARIANT);
	return 0;
}
C
cc -O1 -DVARIANT=1 -o "$work/prog" "$work/prog.c"
"$TK" record --btrace -q -o "$work/p.tkbt" -- "$work/prog" >/dev/null
insns() { awk '/^insn: / { n += $2 } END { print n }' "$1"; }
"$TK" decode --stat "$work/p.tkbt" >"$work/orig.stat"
want=$(insns "$work/orig.stat")
"$TK" profile --to csv "$work/p.tkbt" >"$work/orig.csv"
grep -q '^"work",1,' "$work/orig.csv" || { echo "no call of work"; cat "$work/orig.csv"; exit 1; }

mkdir "$work/moved"
mv "$work/prog" "$work/moved/prog"
# gone: decoded with gaps, status 1, the module named
status=0
"$TK" decode --stat "$work/p.tkbt" >"$work/gone.stat" 2>"$work/gone.err" || status=$?
[ "$status" -eq 1 ] || { echo "gone: decode exit status $status, not 1"; cat "$work/gone.err"; exit 1; }
grep -q "module $work/prog is gone" "$work/gone.err" || { echo "gone: module not named"; cat "$work/gone.err"; exit 1; }
status=0
"$TK" profile --to csv "$work/p.tkbt" >/dev/null 2>&1 || status=$?
[ "$status" -eq 1 ] || { echo "gone: profile exit status $status, not 1"; exit 1; }
# stand-ins: --elf FILE, --elf FILE:BIAS, --module-path DIR
bias=$("$TK" info "$work/p.tkbt" | sed -n 's/.* bias \(0x[0-9a-f]*\) .*/\1/p')
for opt in "--elf $work/moved/prog" "--elf $work/moved/prog:$bias" "--module-path $work/moved"; do
	"$TK" decode --stat $opt "$work/p.tkbt" >"$work/s.stat" 2>"$work/s.err" ||
		{ echo "$opt: decode failed"; cat "$work/s.err"; exit 1; }
	[ "$(insns "$work/s.stat")" = "$want" ] || { echo "$opt: $(insns "$work/s.stat") instructions, not $want"; exit 1; }
	"$TK" profile --to csv $opt "$work/p.tkbt" >"$work/s.csv" 2>"$work/s.err" ||
		{ echo "$opt: profile failed"; cat "$work/s.err"; exit 1; }
	cmp -s "$work/s.csv" "$work/orig.csv" || { echo "$opt: profile differs"; diff "$work/orig.csv" "$work/s.csv"; exit 1; }
done
# rebuilt at the recorded path: not used, even if given as a stand-in
cc -O2 -DVARIANT=2 -o "$work/prog" "$work/prog.c"
status=0
"$TK" decode --stat --elf "$work/prog" "$work/p.tkbt" >/dev/null 2>"$work/re.err" || status=$?
[ "$status" -eq 1 ] || { echo "rebuilt: decode exit status $status, not 1"; cat "$work/re.err"; exit 1; }
grep -q "is not the file that ran (its build-id differs)" "$work/re.err" || { echo "rebuilt: not said"; cat "$work/re.err"; exit 1; }
"$TK" decode --stat --module-path "$work/moved" "$work/p.tkbt" >"$work/s.stat" 2>/dev/null ||
	{ echo "rebuilt + --module-path: decode failed"; exit 1; }
[ "$(insns "$work/s.stat")" = "$want" ] || { echo "rebuilt + --module-path: wrong instructions"; exit 1; }
echo ok
