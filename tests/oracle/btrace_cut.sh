#!/usr/bin/env bash
# One thread calls _exit while two others run traced code: each running thread's buffer is
# taken between two of its records and written whole, so the trace decodes without torn
# packets (decode exits 0, no errors), and `info` marks those threads as cut: running when
# the process ended. Repeated a few times: where a thread is when _exit comes varies.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/cut.c" <<'C'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static volatile long progress[2];
__attribute__((noinline)) static long step(long i)
{
	return i % 7 ? i * 3 : i / 2;
}
static void *spin(void *p)
{
	volatile long *mine = p;
	for (long i = 0;; i++)
		*mine += step(i) & 1;
	return NULL;
}
int main(void)
{
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, spin, (void *)&progress[i]);
	while (progress[0] < 20000 || progress[1] < 20000)
		usleep(1000);
	_exit(0);
}
C
cc -O1 -pthread -o "$work/cut" "$work/cut.c"
for run in 1 2 3; do
	"$TK" record --btrace -o "$work/c.tkbt" -- "$work/cut" 2>"$work/c.err" || { echo "run $run: record failed"; cat "$work/c.err"; exit 1; }
	"$TK" info "$work/c.tkbt" >"$work/c.info" || { echo "run $run: info failed"; cat "$work/c.info"; exit 1; }
	grep -q ', complete$' "$work/c.info" || { echo "run $run: not complete"; cat "$work/c.info"; exit 1; }
	n=$(grep -c 'cut: running when the process ended' "$work/c.info" || true)
	[ "$n" -eq 2 ] || { echo "run $run: $n threads marked as cut, not 2"; cat "$work/c.info"; exit 1; }
	grep -q '2 thread(s) were running when the process ended' "$work/c.err" || { echo "run $run: record does not say so"; cat "$work/c.err"; exit 1; }
	"$TK" decode --stat "$work/c.tkbt" >"$work/c.stat" 2>&1 || { echo "run $run: decode failed"; cat "$work/c.stat"; exit 1; }
	if grep -v '^errors: 0$' "$work/c.stat" | grep -q '^errors:'; then
		echo "run $run: decode errors"; cat "$work/c.stat"; exit 1
	fi
done
echo ok
