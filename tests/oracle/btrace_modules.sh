#!/usr/bin/env bash
# --module by bare file name traces that library (libm: log1p's 1000 calls are seen); libc
# can be traced (printf's call is seen, the trace is complete and decodes), alone or with
# the program, and its functions are named from its debug file; the module of the recorder itself is refused with a message while the
# program runs to its end, instead of being patched and killed by a trap inside the handler.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/usem.c" <<'C'
#include <math.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	double s = 0;
	for (int i = 0; i < 1000; i++)
		s += log1p(i * (double)argc);
	printf("%.3f\n", s);
	return 0;
}
C
cc -O1 -o "$work/usem" "$work/usem.c" -lm
want=$("$work/usem")

got=$("$TK" record --btrace --module libm.so.6 -o "$work/m.tkbt" -- "$work/usem" 2>"$work/m.err")
[ "$got" = "$want" ] || { echo "libm run printed '$got', not '$want'"; exit 1; }
"$TK" profile --to csv "$work/m.tkbt" >"$work/m.csv" 2>/dev/null || true
grep -q '^"log1p",1000,' "$work/m.csv" || { echo "libm trace: no 1000 calls of log1p"; cat "$work/m.err" "$work/m.csv"; exit 1; }

for mods in "--module libc.so.6" "--module main --module libc.so.6"; do
	got=$("$TK" record --btrace $mods -o "$work/c.tkbt" -- "$work/usem" 2>"$work/c.err") ||
		{ echo "libc ($mods): record failed"; cat "$work/c.err"; exit 1; }
	[ "$got" = "$want" ] || { echo "libc run printed '$got', not '$want'"; cat "$work/c.err"; exit 1; }
	"$TK" info "$work/c.tkbt" >"$work/c.info"
	grep -q 'complete' "$work/c.info" || { echo "libc ($mods): trace incomplete"; cat "$work/c.info"; exit 1; }
	grep -q 'module .*/libc.so.6 ' "$work/c.info" || { echo "libc ($mods): not traced"; cat "$work/c.info"; exit 1; }
	"$TK" decode --stat "$work/c.tkbt" >"$work/c.stat" || { echo "libc ($mods): decode failed"; cat "$work/c.stat"; exit 1; }
	"$TK" profile --to csv "$work/c.tkbt" >"$work/c.csv" 2>/dev/null
	grep -q '^"printf",1,' "$work/c.csv" || { echo "libc ($mods): no call of printf"; cat "$work/c.csv"; exit 1; }
	# a function libc does not export, named from its debug file (libc6-dbg)
	grep -q '^"__printf_fp_l",1,' "$work/c.csv" || { echo "libc ($mods): no internal name"; cat "$work/c.csv"; exit 1; }
done

status=0
got=$("$TK" record --btrace --module libtkbtrace.so -o "$work/r.tkbt" -- "$work/usem" 2>"$work/r.err") || status=$?
[ "$got" = "$want" ] || { echo "recorder run printed '$got', not '$want'"; cat "$work/r.err"; exit 1; }
[ "$status" -ne 0 ] || { echo "recorder module: exit status 0 with nothing traced"; exit 1; }
grep -q "libtkbtrace.so is not traced: the recorder's trap handler runs its code (the recorder)" "$work/r.err" ||
	{ echo "recorder module: no refusal message"; cat "$work/r.err"; exit 1; }
if grep -q "killed by signal" "$work/r.err"; then
	echo "recorder module: the program was killed"; cat "$work/r.err"; exit 1
fi
echo ok
