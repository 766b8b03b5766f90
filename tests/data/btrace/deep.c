/* Recursion deeper than the 64 returns the processor's compression stack holds, with
 * calls and conditional branches at every level: the returns past the 64th are TIPs, and
 * the walk pushes onto a full stack (dropping its oldest entries) both call by call and
 * by whole paths. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int leaf(int x)
{
	return x & 1 ? x * 3 : x / 2;
}

__attribute__((noinline)) int down(int n, int acc)
{
	if (n == 0)
		return acc;
	acc += leaf(n) + leaf(n + 1);
	if (acc & 4)
		acc ^= n;
	return down(n - 1, acc) + leaf(acc);
}

int main(int argc, char **argv)
{
	int r = 0, rounds = argc > 1 ? atoi(argv[1]) : 40;

	for (int i = 0; i < rounds; i++)
		r += down(70 + i % 60, i);
	printf("%d\n", r);
	return 0;
}
