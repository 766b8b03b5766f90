#!/usr/bin/env bash
# A handler of the program's runs 10,000 times (SIGUSR1 from another thread) while the main
# thread records from trampolines: a signal that lands in a record is deferred to the
# record's end, not lost, and nothing is torn. The program's output is the same as without
# the recorder, the trace is complete and decodes without error, and the profile counts
# exactly as many calls of the handler as the program counted runs.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/usr1.c" <<'C'
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
static volatile long hits, sink;
static volatile int done;
static pthread_t main_thread;
static sem_t handled;
__attribute__((noinline)) static void on_usr1(int sig)
{
	hits += sig == SIGUSR1;
	sem_post(&handled);
}
/* jcc rel32 in a long loop body: trampolines, where signals land mid-record */
__attribute__((noinline)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++) {
		if (i % 3 == 0) {
			s += i * 7; sink = s; s ^= i << 3; sink = s; s += i * 11; sink = s;
			s -= i * 5; sink = s; s ^= i << 2; sink = s; s += i * 13; sink = s;
		} else {
			s -= i; sink = s; s ^= i << 1; sink = s; s += i * 23; sink = s;
			s += i * 29; sink = s; s ^= i << 7; sink = s; s += i * 31; sink = s;
		}
	}
	return s;
}
static void *sender(void *p)
{
	(void)p;
	for (int i = 0; i < 10000; i++) {
		pthread_kill(main_thread, SIGUSR1);
		sem_wait(&handled);   /* one run per signal: none merges with the next */
	}
	done = 1;
	return NULL;
}
int main(void)
{
	struct sigaction sa;
	pthread_t t;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	main_thread = pthread_self();
	sem_init(&handled, 0, 0);
	long first = work(2000), same = 1;
	pthread_create(&t, NULL, sender, NULL);
	while (!done)
		same &= work(2000) == first;
	pthread_join(t, NULL);
	printf("%ld %ld\n", first, same);
	fprintf(stderr, "%ld\n", hits);
	return 0;
}
C
cc -O1 -pthread -o "$work/usr1" "$work/usr1.c"
want=$("$work/usr1" 2>/dev/null)
got=$("$TK" record --btrace -q -o "$work/u.tkbt" -- "$work/usr1" 2>"$work/hits") ||
	{ echo "record failed"; cat "$work/hits"; exit 1; }
[ "$got" = "$want" ] || { echo "printed '$got', not '$want'"; exit 1; }
hits=$(tail -n 1 "$work/hits")
[ "$hits" -gt 0 ] || { echo "no signal handled"; exit 1; }
"$TK" info "$work/u.tkbt" >"$work/u.info" || { echo "info failed"; cat "$work/u.info"; exit 1; }
grep -q ', complete$' "$work/u.info" || { echo "trace not complete"; cat "$work/u.info"; exit 1; }
"$TK" decode --stat "$work/u.tkbt" >"$work/u.stat" 2>&1 || { echo "decode failed"; cat "$work/u.stat"; exit 1; }
if grep '^errors:' "$work/u.stat" | grep -vq '^errors: 0$'; then echo "decode errors"; cat "$work/u.stat"; exit 1; fi
"$TK" profile --to csv "$work/u.tkbt" >"$work/u.csv" 2>/dev/null
[ "$hits" -eq 10000 ] || { echo "the handler ran $hits times, not 10000"; exit 1; }
grep -q "^\"on_usr1\",$hits," "$work/u.csv" || { echo "the handler ran $hits times; the profile says:"; grep on_usr1 "$work/u.csv"; exit 1; }
echo "ok ($hits handler runs)"
