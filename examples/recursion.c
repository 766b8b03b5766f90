/* Recursion (direct and mutual) and longjmp out of a recursion: the call-stack builder must
 * end the abandoned frames when a later return lands deeper in the stack. */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf escape;

__attribute__((noinline)) int fib(int n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2); /* fib(15): 1973 calls */
}

int is_odd(unsigned n);

__attribute__((noinline)) int is_even(unsigned n)
{
	return n == 0 ? 1 : is_odd(n - 1);
}

__attribute__((noinline)) int is_odd(unsigned n)
{
	return n == 0 ? 0 : is_even(n - 1);
}

__attribute__((noinline)) void dive(int depth)
{
	if (depth == 5)
		longjmp(escape, 1); /* abandons 6 dive frames */
	dive(depth + 1);
}

__attribute__((noinline)) int try_dive(void)
{
	if (setjmp(escape))
		return 1;
	dive(0);
	return 0;
}

int main(void)
{
	int r = fib(15);
	r += is_even(20);       /* is_even: 11 calls, is_odd: 10 calls */
	for (int i = 0; i < 3; i++)
		r += try_dive();    /* try_dive: 3 calls, dive: 18 calls */
	printf("%d\n", r);
	return 0;
}
