/* Asynchronous signals (a fast SIGPROF timer) landing anywhere, including in trampolines:
 * the trace must stay decodable and count the handler's runs exactly. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

static volatile long ticks;
static volatile long sink;

static void on_prof(int sig)
{
	(void)sig;
	ticks++;
}

/* A loop body long enough that its branches are jcc rel32 (trampolines). */
__attribute__((noipa)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++) {
		if (i % 3 == 0) {
			s += i * 7; sink = s; s ^= i << 3; sink = s; s += i * 11; sink = s;
			s -= i * 5; sink = s; s ^= i << 2; sink = s; s += i * 13; sink = s;
			s += i * 17; sink = s; s ^= i << 5; sink = s; s += i * 19; sink = s;
		} else {
			s -= i; sink = s; s ^= i << 1; sink = s; s += i * 23; sink = s;
			s += i * 29; sink = s; s ^= i << 7; sink = s; s += i * 31; sink = s;
		}
	}
	return s;
}

int main(void)
{
	struct sigaction sa;
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	setitimer(ITIMER_PROF, &it, NULL);
	long s = work(300000);
	/* The timer counts CPU time in scheduler ticks: a work() that the recorder runs in a few
	 * milliseconds may see no tick. Wait for one outside work(), whose count is compared. */
	while (!ticks)
		sink++;
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_PROF, &off, NULL);
	printf("%ld ticks %ld\n", s, ticks);
	return 0;
}
