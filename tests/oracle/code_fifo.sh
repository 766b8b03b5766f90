#!/usr/bin/env bash
# A trace whose code file was replaced by a FIFO (issue 31 item 20): decode, profile and
# stats must not block on it (they hung in open() for ever), but say that it is not a
# regular file and exit non-zero.
set -euo pipefail
: "${TK:?}"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat >"$W/prog.c" <<'C'
#include <stdio.h>
int work(int i) { return i * 3 + 1; }
int main(void)
{
	int s = 0;
	for (int i = 0; i < 100; i++)
		s += work(i);
	printf("%d\n", s);
	return 0;
}
C
cc -O1 -o "$W/prog" "$W/prog.c"
"$TK" record --btrace -q -o "$W/t.tkbt" -- "$W/prog" >/dev/null
rm "$W/prog"
mkfifo "$W/prog"
fail=0
for cmd in "decode --stat" profile stats; do
	st=0
	timeout 30 "$TK" $cmd "$W/t.tkbt" >/dev/null 2>"$W/err" || st=$?
	if [ $st = 124 ]; then
		echo "FAIL: $cmd blocks on the FIFO"; fail=1
	elif [ $st = 0 ] || ! grep -q "prog:\{0,1\} \(is \)\{0,1\}not a regular file" "$W/err"; then
		echo "FAIL: $cmd: status $st"; cat "$W/err"; fail=1
	else
		echo "ok: $cmd (status $st)"
	fi
done
[ $fail -eq 0 ] && echo "code file FIFO: all passed"
exit $fail
