/* Calls abandoned by longjmp, ended by a return far below them: tests/oracle/*_seams.sh. */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf env;
static unsigned long ndeep;

__attribute__((noinline)) static void deep(int n)
{
	ndeep++;
	if (n == 0)
		longjmp(env, 1);
	deep(n - 1);
}

__attribute__((noinline)) static int run(int iters)
{
	volatile int caught = 0;
	for (volatile int i = 0; i < iters; i++)
		if (!setjmp(env))
			deep(i % 12);
		else
			caught++;
	return caught;
}

int main(void)
{
	int total = 0;
	for (int r = 0; r < 40; r++)
		total += run(60);
	printf("%lu\n", ndeep);
	return 0;
}
