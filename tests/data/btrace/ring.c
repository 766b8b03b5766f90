/* The flight recorder (record --ring, --max-size, --snapshot-signal): a loop of calls,
 * then, as argv[2] says, a crash ("crash"), a snapshot signal to itself and more work
 * ("signal"), or a normal exit. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) int step(int i)
{
	return i % 7 == 3 ? i * 2 : i + 1;
}

__attribute__((noinline)) void boom(volatile int *p)
{
	*p = 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, s = 0;
	const char *then = argc > 2 ? argv[2] : "";
	for (long i = 0; i < n; i++)
		s += step((int)i);
	if (!strcmp(then, "crash"))
		boom((volatile int *)(s & 0));
	if (!strcmp(then, "signal")) {
		raise(SIGUSR2);
		for (long i = 0; i < n; i++)   /* after the snapshot: not recorded */
			s += step((int)i);
	}
	return s == 0;
}
