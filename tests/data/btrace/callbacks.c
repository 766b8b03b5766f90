/* Traced code called back from untraced libc: qsort comparators (from a loop, so a
 * return site and the loop head both lead to the first trap after qsort returns), an atexit
 * handler and a signal handler raised synchronously. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static volatile long sink;

__attribute__((noinline)) static int by_value(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

__attribute__((noinline)) static int by_digit_sum(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b, sx = 0, sy = 0;
	for (; x; x /= 10)
		sx += x % 10;
	for (; y; y /= 10)
		sy += y % 10;
	return sx - sy;
}

static void at_end(void)
{
	long s = 0;
	for (int i = 0; i < 20; i++)
		s += i & 3;
	sink = s;
}

static void on_usr1(int sig)
{
	for (int i = 0; i < sig; i++)
		sink += i;
}

__attribute__((constructor)) static void setup(void)
{
	atexit(at_end);
	signal(SIGUSR1, on_usr1);
}

/* Nothing trapped from main's start to the loop test, which the return site of qsort
 * also leads to: the recorder must know that qsort, not libc's call of main, returned. */
int main(int argc, char **argv)
{
	int n = 250 + 50 * argc, v[1000];
	long total = 0;

	(void)argv;
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < n; i++)
			v[i] = (i * 7919 + round * 31) % 1000;
		raise(SIGUSR1);
		/* the last call of the loop body: after it, the return site and main's start
		 * both lead to the loop test without a trapped CTI */
		qsort(v, (size_t)n, sizeof *v, round & 1 ? by_digit_sum : by_value);
		total += v[0] + v[n - 1];
	}
	printf("%ld\n", total);
	return 0;
}
