/* Call-heavy: small functions called through direct and indirect calls. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long leaf(long x) { return x * 3 + 1; }
__attribute__((noinline)) static long mid(long x) { return leaf(x) + leaf(x >> 1); }
__attribute__((noinline)) static long twice(long x) { return x << 1; }
long (*volatile fp)(long) = twice;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, s = 0;
	for (long i = 0; i < n; i++)
		s += mid(i) + fp(i);
	printf("%ld\n", s);
	return 0;
}
