/* Test program for the xtrace recorder: calls, indirect calls and jumps, recursion,
 * exclusive load/store, SVE loops, syscalls including writev. Deterministic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static long counter;
static double vals[512];
static int ints[2048];

static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
static long twice(long x) { return 2 * x; }
static long plus3(long x) { return x + 3; }
static long (*const ops[])(long) = { twice, plus3 };

__attribute__((noinline)) static int classify(int x)
{
	switch (x & 7) {
	case 0: return 11;
	case 1: return 23;
	case 2: return 5;
	case 3: return 99;
	case 4: return 7;
	case 5: return 1;
	case 6: return 42;
	default: return 0;
	}
}

__attribute__((noinline)) static void saxpy(int n, int a, int *restrict y, const int *restrict x)
{
	for (int i = 0; i < n; i++)
		y[i] = a * x[i] + y[i];
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	long acc = 0;
	for (int i = 0; i < 2048; i++)
		ints[i] = i % 17;
	for (int r = 0; r < n; r++) {
		acc += fib(12);
		for (int i = 0; i < 64; i++) {
			acc = ops[i & 1](acc) % 1000003;
			acc += classify(i + r);
			__atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
		}
		saxpy(2048, r, ints, ints);
		for (int i = 0; i < 512; i++)
			vals[i] = vals[i] * 0.5 + i;
	}
	char a[32], b[32];
	int la = snprintf(a, sizeof a, "acc %ld ", acc);
	int lb = snprintf(b, sizeof b, "counter %ld %d\n", counter, ints[100] + (int)vals[3]);
	struct iovec iov[2] = { { a, (size_t)la }, { b, (size_t)lb } };
	if (writev(1, iov, 2) != la + lb)
		return 1;
	return 0;
}
