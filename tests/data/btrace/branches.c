/* Loops, a switch table, function pointers, recursion and tail calls: the recorder's
 * exactness test compares this program's per-function instruction counts with callgrind. */
#include <stdio.h>
#include <stdlib.h>

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
static int sq(int x) { return x * x; }
static int neg(int x) { return -x; }
int (*volatile ops[2])(int) = { sq, neg };

__attribute__((noinline)) static long tail2(long n, long acc);
__attribute__((noinline)) static long tail1(long n, long acc)
{
	if (n <= 0)
		return acc;
	return tail2(n - 1, acc + 3);
}
__attribute__((noinline)) static long tail2(long n, long acc)
{
	if (n <= 0)
		return acc;
	return tail1(n - 1, acc ^ n);
}

__attribute__((noinline)) static long dispatch(int i, long s)
{
	switch (i % 9) {
	case 0: return s + ops[i & 1](i);
	case 1: return s - 3;
	case 2: return s ^ i;
	case 3: return s + 11;
	case 4: return s * 3;
	case 5: return s + i * 2;
	case 6: return s >> 1;
	case 7: return s | 0x40;
	default: return s - i;
	}
}

int main(int argc, char **argv)
{
	long s = 0;
	int n = argc > 1 ? atoi(argv[1]) : 3000;
	for (int i = 0; i < n; i++)
		s = dispatch(i, s);
	s += fib(18);
	s += tail1(1001, 0);
	printf("%ld\n", s);
	return 0;
}
