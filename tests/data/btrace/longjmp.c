/* setjmp/longjmp out of nested calls, and a signal handler the program installs itself.
 * No memset of a local struct: gcc inlines it as `rep stos`, which callgrind counts once per
 * iteration and a branch trace (like Intel PT) once, so main's counts could not be equal. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>

static jmp_buf env;
static volatile int hits;

__attribute__((noinline)) static void deep(int n, int i)
{
	if (n == 0) {
		if (i % 3 == 0)
			longjmp(env, i + 1);
		return;
	}
	deep(n - 1, i);
}

static void on_usr1(int sig)
{
	for (int i = 0; i < 10; i++)
		if (i & sig)
			hits++;
}

int main(void)
{
	static struct sigaction sa;
	long s = 0;
	sa.sa_handler = on_usr1;
	sigfillset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < 300; i++) {
		int r = setjmp(env);
		if (r) {
			s += r;
			continue;
		}
		deep(i % 20, i);
		if (i % 50 == 0)
			raise(SIGUSR1);
		s++;
	}
	printf("%ld %d\n", s, hits);
	return 0;
}
