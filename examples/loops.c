/* Loops with known counts, an inlined helper and calls through function pointers.
 * tests/oracle/test_analysis_examples.c knows these counts; the LINE: markers name lines. */
#include <stdio.h>

static inline __attribute__((always_inline)) int square(int x)
{
	return x * x; /* LINE:square */
}

__attribute__((noinline)) int leaf(int x)
{
	return 3 * x + 1;
}

__attribute__((noinline)) int inner(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += leaf(i); /* LINE:inner-call */
	return s;
}

__attribute__((noinline)) int twice(int x)
{
	return 2 * x;
}

__attribute__((noinline)) int negate(int x)
{
	return -x;
}

__attribute__((noinline)) int apply(int (*fn)(int), int x)
{
	return fn(x);
}

int main(void)
{
	int (*const table[2])(int) = { twice, negate };
	volatile int total = 0;

	for (int r = 0; r < 10; r++)
		total += inner(100);            /* inner: 10 calls, leaf: 1000 calls */
	for (int i = 0; i < 7; i++)
		total += apply(table[i % 2], i); /* twice: 4 calls, negate: 3 calls */
	for (int i = 0; i < 50; i++)
		total += square(i);             /* LINE:square-loop */
	printf("%d\n", total);
	return 0;
}
