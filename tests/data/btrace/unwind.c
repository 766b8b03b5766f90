/* longjmp out of a recursion 0-8 calls deep, 500 times: the trace resumes in main (after
 * setjmp's call, which returned long ago) while the frames of deep and of longjmp's PLT stub
 * are still open; untraced libc unwound them. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf env;

__attribute__((noinline)) static void deep(int n)
{
	if (n == 0)
		longjmp(env, 1);
	deep(n - 1);
	__asm__ volatile("");   /* not a tail call */
}

int main(int argc, char **argv)
{
	long s = 0, n = argc > 1 ? atol(argv[1]) : 500;

	for (long i = 0; i < n; i++) {
		if (!setjmp(env))
			deep((int)(i % 9));
		s += i;
	}
	printf("%ld\n", s);
	return 0;
}
