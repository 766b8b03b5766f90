#!/usr/bin/env bash
# A program that crashes (SIGSEGV), calls abort() or is stopped with SIGTERM keeps its trace:
# the recorder writes each thread's last piece from the fatal signal, records the signal,
# and raises it again, so the program still dies by it. The trace holds the call made just
# before the crash (last_call), says where it ends (`info`: "ends at signal N"), and decodes
# without error; `record` exits as a shell reports the program's death, 128 + N (the trace
# itself is complete up to the signal).
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/crash.c" <<'C'
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((noinline)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i % 3 ? i : -i;
	return s;
}
__attribute__((noinline)) static long last_call(long n)
{
	return n & 1 ? n * 3 : n / 2;
}
int main(int argc, char **argv)
{
	volatile long s = work(1000);
	s += last_call(s);
	if (!strcmp(argv[1], "segv"))
		*(volatile int *)(long)(argc - 2) = (int)s;   /* argc is 2: a null pointer */
	else if (!strcmp(argv[1], "abort"))
		abort();
	else
		kill(getpid(), SIGTERM);
	printf("not reached\n");
	return 0;
}
C
cc -O1 -o "$work/crash" "$work/crash.c"
for mode in segv:11 abort:6 term:15; do
	how=${mode%:*} sig=${mode#*:}
	status=0
	"$TK" record --btrace -o "$work/$how.tkbt" -- "$work/crash" "$how" >"$work/$how.out" 2>"$work/$how.err" || status=$?
	grep -q "killed by signal $sig " "$work/$how.err" || { echo "$how: not killed by signal $sig"; cat "$work/$how.err"; exit 1; }
	[ "$status" -eq $((128 + sig)) ] || { echo "$how: record exit status $status, not $((128 + sig))"; cat "$work/$how.err"; exit 1; }
	"$TK" info "$work/$how.tkbt" >"$work/$how.info" || { echo "$how: info failed"; cat "$work/$how.info"; exit 1; }
	grep -q "ends at signal $sig " "$work/$how.info" || { echo "$how: info does not say signal $sig"; cat "$work/$how.info"; exit 1; }
	"$TK" profile --to csv "$work/$how.tkbt" >"$work/$how.csv" 2>"$work/$how.perr" ||
		{ echo "$how: profile failed"; cat "$work/$how.perr"; exit 1; }
	grep -q '^"work",1,' "$work/$how.csv" || { echo "$how: no call of work"; cat "$work/$how.csv"; exit 1; }
	grep -q '^"last_call",1,' "$work/$how.csv" || { echo "$how: the last call before the crash is missing"; cat "$work/$how.csv"; exit 1; }
	"$TK" decode --stat "$work/$how.tkbt" >"$work/$how.stat" 2>&1 || { echo "$how: decode failed"; cat "$work/$how.stat"; exit 1; }
	grep -q '^errors: 0$' "$work/$how.stat" || { echo "$how: decode errors"; cat "$work/$how.stat"; exit 1; }
done
# the crash: the decoded flow stops where the signal came (FUP + TIP.PGD), in main, at
# the instruction before the faulting store
"$TK" decode "$work/segv.tkbt" >"$work/segv.flow"
tail -n 1 "$work/segv.flow" | grep -q '^\[async disabled\]$' || { echo "segv: the flow does not end at the signal"; tail "$work/segv.flow"; exit 1; }
last=$(grep -v '^\[' "$work/segv.flow" | tail -n 1 | cut -d' ' -f1)
bias=$(sed -n 's/.* bias \(0x[0-9a-f]*\) .*/\1/p' "$work/segv.info")
read -r start size < <(nm -S "$work/crash" | awk '$4 == "main" { print $1, $2 }')
python3 - "$last" "$bias" "$start" "$size" <<'PY' || { echo "segv: the flow ends at $last, outside main"; exit 1; }
import sys
last, bias, start, size = (int(x, 16) for x in sys.argv[1:])
sys.exit(0 if bias + start <= last < bias + start + size else 1)
PY
echo ok
