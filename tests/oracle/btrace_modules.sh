#!/usr/bin/env bash
# --module by bare file name traces that library (libm: log1p's 1000 calls are seen), and a
# module the recorder's own trap handler runs (libc) is refused with a message while the
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

status=0
got=$("$TK" record --btrace --module libc.so.6 -o "$work/c.tkbt" -- "$work/usem" 2>"$work/c.err") || status=$?
[ "$got" = "$want" ] || { echo "libc run printed '$got', not '$want'"; cat "$work/c.err"; exit 1; }
[ "$status" -ne 0 ] || { echo "libc: exit status 0 with nothing traced"; exit 1; }
grep -q "libc.so.6 is not traced: the recorder's trap handler runs its code" "$work/c.err" ||
	{ echo "libc: no refusal message"; cat "$work/c.err"; exit 1; }
if grep -q "killed by signal" "$work/c.err"; then
	echo "libc: the program was killed"; cat "$work/c.err"; exit 1
fi
echo ok
